#include "cadre/estimator/checkpoint_saver_hook.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "cadre/runtime/profiler.h"
#include "core/nn/deferred_copy.h"

namespace cadre {

CheckpointSaverHook::CheckpointSaverHook(std::optional<int64_t> save_steps,
                                         std::optional<double> save_secs,
                                         CheckpointSaverListeners listeners)
    : timer_(save_secs ? std::nullopt : save_steps, save_secs), listeners_(std::move(listeners)) {}

void CheckpointSaverHook::begin(Run& run) {
  timer_.reset();
  saved_.clear();
  blocked_seconds_ = 0;
  max_blocked_seconds_ = 0;
  copy_wait_at_begin_ = nn::deferred_copy_wait_seconds();
  for (const auto& listener : listeners_) listener->begin();
}

void CheckpointSaverHook::after_create(Run& run) {
  // The interval counts from where the run starts, not from step 0.
  timer_.update_last_triggered_step(run.global_step());
}

bool CheckpointSaverHook::save(Run& run, int64_t global_step) {
  for (const auto& listener : listeners_) listener->before_save(global_step);
  auto start = std::chrono::steady_clock::now();
  std::string path;
  {
    profiler::Scope scope("checkpoint", profiler::kPhase);
    path = run.save_checkpoint();
  }
  double blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  blocked_seconds_ += blocked;
  max_blocked_seconds_ = std::max(max_blocked_seconds_, blocked);
  saved_.push_back(path);
  if (listeners_.empty()) return false;
  if (run.planned_stop()) {
    LOG(INFO) << "a planned stop: the saving listeners see " << path << " when training resumes";
    return false;
  }
  // Listeners read what they are told was saved (an evaluation, an export).
  profiler::Scope scope("saving_listeners", profiler::kPhase);
  run.wait_for_checkpoints();
  bool stop = false;
  for (const auto& listener : listeners_) stop = listener->after_save(global_step, path) || stop;
  return stop;
}

void CheckpointSaverHook::before_run(Run& run, RunContext& context) {
  int64_t next = run.global_step() + 1;
  announced_ = timer_.should_trigger(next) || (run.max_steps() && next >= *run.max_steps());
  if (announced_) run.announce_checkpoint();
}

void CheckpointSaverHook::after_run(Run& run, const StepResult& result, RunContext& context) {
  // Only announced steps: an interval in seconds that runs out during a step saves the next.
  if (!announced_ || !timer_.should_trigger(result.global_step)) return;
  timer_.update_last_triggered_step(result.global_step);
  if (save(run, result.global_step)) {
    LOG(INFO) << "a checkpoint listener asked training to stop at step " << result.global_step;
    context.request_stop();
  }
}

void CheckpointSaverHook::end(Run& run) {
  int64_t step = run.global_step();
  if (timer_.last_triggered_step() != step) {
    timer_.update_last_triggered_step(step);
    save(run, step);
  }
  {
    profiler::Scope scope("checkpoint", profiler::kPhase);  // training waits for it here
    run.wait_for_checkpoints();
  }
  if (!saved_.empty()) {
    LOG(INFO) << saved_.size() << " checkpoint(s) saved; training waited "
              << 1e3 * blocked_seconds_ / static_cast<double>(saved_.size())
              << " ms per save on average, " << 1e3 * max_blocked_seconds_
              << " ms at most; updates waited for background copies "
              << 1e3 * (nn::deferred_copy_wait_seconds() - copy_wait_at_begin_) /
                     static_cast<double>(saved_.size())
              << " ms per save";
  }
  if (!run.planned_stop()) {
    for (const auto& listener : listeners_) listener->end(step);
  }
}

}  // namespace cadre
