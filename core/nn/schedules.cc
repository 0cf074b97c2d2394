#include "cadre/nn/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"

namespace cadre::nn {
namespace {

class ExponentialDecay : public LearningRateSchedule {
 public:
  ExponentialDecay(double initial, int64_t steps, double rate, bool staircase)
      : initial_(initial), steps_(steps), rate_(rate), staircase_(staircase) {}
  ScheduleConfig config() const override {
    return {"exponential_decay",
            {{"initial", initial_},
             {"decay_steps", static_cast<double>(steps_)},
             {"decay_rate", rate_},
             {"staircase", staircase_ ? 1.0 : 0.0}},
            {}};
  }
  double operator()(int64_t step) const override {
    double p = static_cast<double>(step) / static_cast<double>(steps_);
    if (staircase_) p = std::floor(p);
    return initial_ * std::pow(rate_, p);
  }

 private:
  double initial_;
  int64_t steps_;
  double rate_;
  bool staircase_;
};

class PiecewiseConstant : public LearningRateSchedule {
 public:
  PiecewiseConstant(std::vector<int64_t> boundaries, std::vector<double> values)
      : boundaries_(std::move(boundaries)), values_(std::move(values)) {}
  ScheduleConfig config() const override {
    return {"piecewise_constant",
            {},
            {{"boundaries", std::vector<double>(boundaries_.begin(), boundaries_.end())},
             {"values", values_}}};
  }
  double operator()(int64_t step) const override {
    auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), step);
    return values_[static_cast<size_t>(it - boundaries_.begin())];
  }

 private:
  std::vector<int64_t> boundaries_;
  std::vector<double> values_;
};

class CosineDecay : public LearningRateSchedule {
 public:
  CosineDecay(double initial, int64_t steps, double alpha)
      : initial_(initial), steps_(steps), alpha_(alpha) {}
  ScheduleConfig config() const override {
    return {
        "cosine_decay",
        {{"initial", initial_}, {"decay_steps", static_cast<double>(steps_)}, {"alpha", alpha_}},
        {}};
  }
  double operator()(int64_t step) const override {
    double progress = static_cast<double>(std::min(step, steps_)) / static_cast<double>(steps_);
    double cosine = 0.5 * (1 + std::cos(std::numbers::pi * progress));
    return initial_ * ((1 - alpha_) * cosine + alpha_);
  }

 private:
  double initial_;
  int64_t steps_;
  double alpha_;
};

}  // namespace

ScheduleConfig LearningRateSchedule::config() const {
  throw UnimplementedError(
      "this learning-rate schedule has no config(): parameter servers apply only schedules "
      "that can be described as data (exponential_decay, piecewise_constant, cosine_decay)");
}

std::shared_ptr<LearningRateSchedule> exponential_decay(double initial, int64_t decay_steps,
                                                        double decay_rate, bool staircase) {
  if (decay_steps <= 0) {
    throw InvalidArgumentError(
        str_cat("exponential_decay: decay_steps must be positive, got ", decay_steps));
  }
  return std::make_shared<ExponentialDecay>(initial, decay_steps, decay_rate, staircase);
}

std::shared_ptr<LearningRateSchedule> piecewise_constant(std::vector<int64_t> boundaries,
                                                         std::vector<double> values) {
  if (values.size() != boundaries.size() + 1) {
    throw InvalidArgumentError(str_cat("piecewise_constant: ", values.size(), " values for ",
                                       boundaries.size(), " boundaries; expected ",
                                       boundaries.size() + 1));
  }
  if (!std::is_sorted(boundaries.begin(), boundaries.end()) ||
      std::adjacent_find(boundaries.begin(), boundaries.end()) != boundaries.end()) {
    throw InvalidArgumentError(
        str_cat("piecewise_constant: boundaries [", join(boundaries), "] must increase"));
  }
  return std::make_shared<PiecewiseConstant>(std::move(boundaries), std::move(values));
}

std::shared_ptr<LearningRateSchedule> cosine_decay(double initial, int64_t decay_steps,
                                                   double alpha) {
  if (decay_steps <= 0) {
    throw InvalidArgumentError(
        str_cat("cosine_decay: decay_steps must be positive, got ", decay_steps));
  }
  return std::make_shared<CosineDecay>(initial, decay_steps, alpha);
}

}  // namespace cadre::nn
