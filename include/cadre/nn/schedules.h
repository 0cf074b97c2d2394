// Learning rates that change with the optimizer's step, with tf.keras's definitions.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace cadre::nn {

struct ScheduleConfig;

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual double operator()(int64_t step) const = 0;
  // The schedule as data (optimizer_config.h), for parameter servers. The built-in
  // schedules have one; the default throws UnimplementedError naming the need.
  virtual ScheduleConfig config() const;
};

// initial * rate^(step / decay_steps), the exponent floored when staircase.
std::shared_ptr<LearningRateSchedule> exponential_decay(double initial, int64_t decay_steps,
                                                        double decay_rate, bool staircase = false);
// values[i] while step <= boundaries[i] (and values.back() after the last boundary);
// values has one more element than boundaries, which must increase.
std::shared_ptr<LearningRateSchedule> piecewise_constant(std::vector<int64_t> boundaries,
                                                         std::vector<double> values);
// initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha).
std::shared_ptr<LearningRateSchedule> cosine_decay(double initial, int64_t decay_steps,
                                                   double alpha = 0);

// A constant or a schedule.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT: a number converts implicitly
  LearningRate(std::shared_ptr<LearningRateSchedule> schedule)  // NOLINT
      : schedule_(std::move(schedule)) {}
  double at(int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }
  bool is_schedule() const { return schedule_ != nullptr; }
  const std::shared_ptr<LearningRateSchedule>& schedule() const { return schedule_; }

 private:
  double value_ = 0;
  std::shared_ptr<LearningRateSchedule> schedule_;
};

}  // namespace cadre::nn
