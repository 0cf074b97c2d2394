#include "cadre/estimator/early_stopping.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "cadre/base/errors.h"
#include "cadre/io/event_file.h"
#include "core/base/strings.h"

namespace cadre {

std::vector<std::pair<int64_t, double>> read_eval_history(const std::string& eval_dir,
                                                          const std::string& metric) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, fs::file_time_type>> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(eval_dir, error)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) {
      files.emplace_back(entry.path().string(), entry.last_write_time());
    }
  }
  // Older files first, so that a step evaluated again later keeps its latest value.
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  std::map<int64_t, double> by_step;
  for (const auto& [path, time] : files) {
    std::vector<io::Event> events;
    try {
      events = io::read_event_file(path);
    } catch (const Error& e) {
      // An evaluator may be writing the file right now: its last record can be partial.
      LOG(WARNING) << "skipping unreadable eval events in " << path << ": " << e.what();
      continue;
    }
    for (const io::Event& event : events) {
      for (const io::SummaryValue& value : event.values) {
        if (value.tag == metric && value.scalar) by_step[event.step] = *value.scalar;
      }
    }
  }
  return {by_step.begin(), by_step.end()};
}

namespace {

// Replays the history: evaluations since the last improvement, and how many times patience
// ran out (the counter restarting each time).
struct PlateauScan {
  int since_improvement = 0;
  int exhausted = 0;
};

PlateauScan scan(const std::vector<std::pair<int64_t, double>>& history,
                 const PlateauOptions& options) {
  PlateauScan result;
  std::optional<double> best;
  for (const auto& [step, value] : history) {
    bool improved = !best || (options.higher_is_better ? value > *best + options.min_delta
                                                       : value < *best - options.min_delta);
    if (improved) {
      best = value;
      result.since_improvement = 0;
      continue;
    }
    if (++result.since_improvement >= options.patience) {
      ++result.exhausted;
      result.since_improvement = 0;
    }
  }
  return result;
}

void check_options(const PlateauOptions& options, std::string_view who) {
  if (options.eval_dir.empty()) throw InvalidArgumentError(str_cat(who, ": eval_dir is empty"));
  if (options.patience <= 0) {
    throw InvalidArgumentError(str_cat(who, ": patience must be positive, got ", options.patience));
  }
  if (options.check_every_steps <= 0) {
    throw InvalidArgumentError(str_cat(who, ": check_every_steps must be positive"));
  }
}

}  // namespace

EarlyStoppingHook::EarlyStoppingHook(PlateauOptions options)
    : options_(std::move(options)), timer_(options_.check_every_steps, std::nullopt) {
  check_options(options_, "EarlyStoppingHook");
}

bool EarlyStoppingHook::should_stop() const {
  auto history = read_eval_history(options_.eval_dir, options_.metric);
  // The first time patience runs out.
  return scan(history, options_).exhausted > 0;
}

void EarlyStoppingHook::after_create(Run& run) {
  timer_.update_last_triggered_step(run.global_step());
}

void EarlyStoppingHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  if (!timer_.should_trigger(result.global_step)) return;
  timer_.update_last_triggered_step(result.global_step);
  if (!should_stop()) return;
  LOG(INFO) << "early stopping at step " << result.global_step << ": " << options_.metric
            << " has not improved for " << options_.patience << " evaluations";
  stopped_ = true;
  context.request_stop();
}

namespace {

class ScaledRate : public nn::LearningRateSchedule {
 public:
  ScaledRate(nn::LearningRate base, std::shared_ptr<std::atomic<double>> multiplier, double floor)
      : base_(std::move(base)), multiplier_(std::move(multiplier)), floor_(floor) {}
  double operator()(int64_t step) const override {
    return std::max(base_.at(step) * multiplier_->load(), floor_);
  }

 private:
  nn::LearningRate base_;
  std::shared_ptr<std::atomic<double>> multiplier_;
  double floor_;
};

}  // namespace

ReduceLrOnPlateau::ReduceLrOnPlateau(PlateauOptions options, double factor,
                                     double min_learning_rate)
    : options_(std::move(options)),
      factor_(factor),
      min_learning_rate_(min_learning_rate),
      timer_(options_.check_every_steps, std::nullopt),
      multiplier_(std::make_shared<std::atomic<double>>(1.0)) {
  check_options(options_, "ReduceLrOnPlateau");
  if (!(factor_ > 0 && factor_ < 1)) {
    throw InvalidArgumentError(
        str_cat("ReduceLrOnPlateau: factor must be in (0, 1), got ", factor_));
  }
}

nn::LearningRate ReduceLrOnPlateau::scaled(nn::LearningRate base) const {
  return nn::LearningRate(
      std::make_shared<ScaledRate>(std::move(base), multiplier_, min_learning_rate_));
}

void ReduceLrOnPlateau::refresh() {
  int reductions = scan(read_eval_history(options_.eval_dir, options_.metric), options_).exhausted;
  if (reductions != reductions_) {
    double multiplier = 1;
    for (int i = 0; i < reductions; ++i) multiplier *= factor_;
    LOG(INFO) << "ReduceLrOnPlateau: " << options_.metric << " plateaued; learning rate multiplier "
              << multiplier_->load() << " -> " << multiplier;
    multiplier_->store(multiplier);
    reductions_ = reductions;
  }
}

void ReduceLrOnPlateau::after_create(Run& run) {
  timer_.update_last_triggered_step(run.global_step());
  refresh();
}

void ReduceLrOnPlateau::after_run(Run& run, const StepResult& result, RunContext& context) {
  if (!timer_.should_trigger(result.global_step)) return;
  timer_.update_last_triggered_step(result.global_step);
  refresh();
}

}  // namespace cadre
