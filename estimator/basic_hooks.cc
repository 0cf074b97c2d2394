#include "cadre/estimator/basic_hooks.h"

#include <glog/logging.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cadre/base/errors.h"
#include "cadre/io/summary_writer.h"
#include "core/base/strings.h"
#include "estimator/progress_text.h"

namespace cadre {

using estimator_internal::eta_text;
using estimator_internal::human_count;

StepTimer::StepTimer(std::optional<int64_t> every_steps, std::optional<double> every_secs)
    : every_steps_(every_steps), every_secs_(every_secs) {
  if (every_steps_.has_value() == every_secs_.has_value()) {
    throw InvalidArgumentError("a hook's timer needs exactly one of every_steps and every_secs");
  }
  if ((every_steps_ && *every_steps_ <= 0) || (every_secs_ && *every_secs_ <= 0)) {
    throw InvalidArgumentError("a hook's every_steps or every_secs must be positive");
  }
}

bool StepTimer::should_trigger(int64_t global_step) const {
  if (!last_step_) return true;
  if (global_step == *last_step_) return false;
  if (every_steps_) return global_step >= *last_step_ + *every_steps_;
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_time_).count();
  return elapsed >= *every_secs_;
}

std::optional<std::pair<double, int64_t>> StepTimer::update_last_triggered_step(
    int64_t global_step) {
  auto now = std::chrono::steady_clock::now();
  std::optional<std::pair<double, int64_t>> since;
  if (last_step_) {
    since = std::make_pair(std::chrono::duration<double>(now - last_time_).count(),
                           global_step - *last_step_);
  }
  last_step_ = global_step;
  last_time_ = now;
  return since;
}

void StepTimer::reset() { last_step_.reset(); }

Tensor StepResult::value(const std::string& name) const {
  if (name == "loss") return Tensor::scalar(loss);
  if (name == "global_step") return Tensor::scalar(global_step);
  if (spec) {
    if (auto it = spec->tensors.find(name); it != spec->tensors.end()) return it->second;
    if (auto it = spec->predictions.find(name); it != spec->predictions.end()) return it->second;
  }
  std::vector<std::string> names{"loss", "global_step"};
  if (spec) {
    for (const auto& [key, value] : spec->tensors) names.push_back(key);
    for (const auto& [key, value] : spec->predictions) names.push_back(key);
  }
  throw InvalidArgumentError(
      str_cat("no value named '", name, "' in this step; available: ", join(names)));
}

// ---------------------------------------------------------------- StopAtStepHook

StopAtStepHook::StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step)
    : num_steps_(num_steps), last_step_(last_step) {}

std::shared_ptr<StopAtStepHook> StopAtStepHook::at_step(int64_t last_step) {
  if (last_step < 0)
    throw InvalidArgumentError(str_cat("StopAtStepHook: last_step ", last_step, " < 0"));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(std::nullopt, last_step));
}

std::shared_ptr<StopAtStepHook> StopAtStepHook::after_steps(int64_t num_steps) {
  if (num_steps < 0)
    throw InvalidArgumentError(str_cat("StopAtStepHook: num_steps ", num_steps, " < 0"));
  return std::shared_ptr<StopAtStepHook>(new StopAtStepHook(num_steps, std::nullopt));
}

void StopAtStepHook::after_create(Run& run) {
  if (num_steps_) last_step_ = run.global_step() + *num_steps_;
}

void StopAtStepHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  if (last_step_ && result.global_step >= *last_step_) context.request_stop();
}

// ---------------------------------------------------------------- LoggingTensorHook

LoggingTensorHook::LoggingTensorHook(std::vector<std::string> names,
                                     std::optional<int64_t> every_n_iter,
                                     std::optional<double> every_n_secs, bool at_end)
    : names_(std::move(names)), timer_(every_n_iter, every_n_secs), at_end_(at_end) {
  if (names_.empty()) throw InvalidArgumentError("LoggingTensorHook: no tensor names given");
}

void LoggingTensorHook::begin(Run& run) {
  timer_.reset();
  pending_.clear();
}

void LoggingTensorHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  bool due = timer_.should_trigger(result.global_step);
  if (!due && !at_end_) return;
  std::string line;
  for (const std::string& name : names_) {
    Tensor value = result.value(name);
    if (!line.empty()) line += ", ";
    if (value.numel() == 1) {
      line += str_cat(name, " = ", value.item<double>());
    } else {
      line += str_cat(name, " = ", value.to_string(16));
    }
  }
  pending_ = line;
  if (!due) return;
  auto since = timer_.update_last_triggered_step(result.global_step);
  if (since) line += str_cat(" (", static_cast<int>(since->first * 1000) / 1000.0, " sec)");
  LOG(INFO) << line;
  last_line_ = std::move(line);
}

void LoggingTensorHook::end(Run& run) {
  if (at_end_ && !pending_.empty()) {
    LOG(INFO) << pending_;
    last_line_ = pending_;
  }
}

// ---------------------------------------------------------------- StepCounterHook

StepCounterHook::StepCounterHook(std::optional<int64_t> every_n_steps,
                                 std::optional<double> every_n_secs)
    : timer_(every_n_secs ? std::nullopt : every_n_steps, every_n_secs) {}

void StepCounterHook::begin(Run& run) {
  timer_.reset();
  examples_since_ = 0;
}

void StepCounterHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  examples_since_ += result.batch_size;
  ++steps_since_;
  if (!timer_.should_trigger(result.global_step)) return;
  auto since = timer_.update_last_triggered_step(result.global_step);
  double per_step = static_cast<double>(examples_since_) / static_cast<double>(steps_since_);
  examples_since_ = steps_since_ = 0;
  if (!since || since->first <= 0) return;  // the first trigger only starts the clock
  steps_per_sec_ = since->second / since->first;
  // The global step also counts other workers' steps (parameter servers): the job's rate
  // is its step rate times the examples a step takes.
  examples_per_sec_ = steps_per_sec_ * per_step;
  if (io::SummaryWriter* writer = run.summary_writer()) {
    writer->scalar("global_step/sec", steps_per_sec_, result.global_step);
    writer->scalar("examples/sec", examples_per_sec_, result.global_step);
  }
  std::string line = str_cat("step ", result.global_step);
  std::optional<int64_t> max_steps = run.max_steps();
  if (max_steps) line += str_cat("/", *max_steps);
  char loss[32];
  std::snprintf(loss, sizeof loss, "%.4g", result.loss);
  line += str_cat("  loss ", loss, "  ", human_count(steps_per_sec_), " steps/s  ",
                  human_count(examples_per_sec_), " ex/s");
  if (max_steps && steps_per_sec_ > 0) {
    if (auto eta = eta_text((*max_steps - result.global_step) / steps_per_sec_)) {
      line += str_cat("  ETA ", *eta);
    }
  }
  LOG(INFO) << line;
}

// ---------------------------------------------------------------- ProgressLineHook

namespace {

double monotonic_secs() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProgressLineHook::ProgressLineHook(std::FILE* out, double interval_secs)
    : out_(out), interval_secs_(interval_secs) {}

void ProgressLineHook::begin(Run& run) {
  last_draw_secs_ = monotonic_secs();
  last_draw_step_ = -1;
  steps_per_sec_ = 0;
  drawn_ = false;
}

void ProgressLineHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  double now = monotonic_secs();
  if (last_draw_step_ < 0) {  // the first step starts the clock
    last_draw_step_ = result.global_step;
    last_draw_secs_ = now;
    return;
  }
  if (now - last_draw_secs_ < interval_secs_) return;
  double rate = (result.global_step - last_draw_step_) / (now - last_draw_secs_);
  // Smoothed, so that the ETA does not jump with each window.
  steps_per_sec_ = steps_per_sec_ == 0 ? rate : 0.7 * steps_per_sec_ + 0.3 * rate;
  last_draw_step_ = result.global_step;
  last_draw_secs_ = now;
  std::string line = str_cat("step ", result.global_step);
  std::optional<int64_t> max_steps = run.max_steps();
  if (max_steps) line += str_cat("/", *max_steps);
  char loss[32];
  std::snprintf(loss, sizeof loss, "%.4g", result.loss);
  line += str_cat("  loss ", loss, "  ", human_count(steps_per_sec_), " steps/s");
  if (max_steps && steps_per_sec_ > 0) {
    if (auto eta = eta_text((*max_steps - result.global_step) / steps_per_sec_)) {
      line += str_cat("  ETA ", *eta);
    }
  }
  // Carriage return and erase-line: the line replaces itself.
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressLineHook::end(Run& run) {
  if (!drawn_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
}

// ---------------------------------------------------------------- NanTensorHook

void NanTensorHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  if (std::isfinite(result.loss)) return;
  throw NanLossDuringTrainingError(str_cat("Model diverged with loss = ", result.loss,
                                           " at global step ", result.global_step,
                                           "; no checkpoint of this state is written"));
}

// ---------------------------------------------------------------- SummarySaverHook

SummarySaverHook::SummarySaverHook(std::optional<int64_t> save_steps,
                                   std::optional<double> save_secs)
    : timer_(save_secs ? std::nullopt : save_steps, save_secs) {}

void SummarySaverHook::begin(Run& run) { timer_.reset(); }

void SummarySaverHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  io::SummaryWriter* writer = run.summary_writer();
  if (!writer || !timer_.should_trigger(result.global_step)) return;
  timer_.update_last_triggered_step(result.global_step);
  writer->scalar("loss", result.loss, result.global_step);
  if (result.spec) {
    if (const auto& optimizer = result.spec->train_op.optimizer) {
      writer->scalar("learning_rate", optimizer->current_learning_rate(), result.global_step);
    }
    for (const auto& [tag, value] : result.spec->scalar_summaries) {
      writer->scalar(tag, value.item<double>(), result.global_step);
    }
  }
}

}  // namespace cadre
