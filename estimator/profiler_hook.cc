#include "cadre/estimator/profiler_hook.h"

#include <glog/logging.h>
#include <unistd.h>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

ProfilerHook::ProfilerHook(ProfilerOptions options) : options_(std::move(options)) {
  if (options_.every_n_steps < 0) {
    throw InvalidArgumentError(str_cat("ProfilerOptions: every_n_steps = ", options_.every_n_steps,
                                       " is invalid; expected >= 0 (0: no summaries)"));
  }
  if (options_.trace_steps) {
    auto [first, last] = *options_.trace_steps;
    if (first < 0 || last <= first) {
      throw InvalidArgumentError(str_cat("ProfilerOptions: trace_steps = [", first, ", ", last,
                                         ") is invalid; expected 0 <= first < last"));
    }
  }
  if (options_.top_ops < 1) {
    throw InvalidArgumentError(
        str_cat("ProfilerOptions: top_ops = ", options_.top_ops, " is invalid; expected >= 1"));
  }
}

ProfilerHook::~ProfilerHook() = default;

bool ProfilerHook::traces(int64_t step) const {
  return options_.write_traces && options_.trace_steps && !trace_done_ &&
         step >= options_.trace_steps->first && step < options_.trace_steps->second;
}

bool ProfilerHook::wants(int64_t step) const { return options_.every_n_steps > 0 || traces(step); }

void ProfilerHook::begin(Run& run) {
  session_.reset();
  unavailable_ = false;
  step_start_ns_ = -1;
  summarized_steps_ = 0;
  summarized_ns_ = 0;
  builder_.clear();
  trace_ = profiler::Profile();
  first_traced_ = -1;
  trace_done_ = false;
  profiler::set_thread_name("training loop");
}

void ProfilerHook::before_run(Run& run, RunContext& context) {
  int64_t now = profiler::now_ns();
  if (step_start_ns_ >= 0) close_step(run, now);
  step_ = run.global_step();
  if (!wants(step_) || unavailable_) {
    session_.reset();
    return;
  }
  if (!session_) {
    try {
      session_ = profiler::ProfilerSession::start();
    } catch (const FailedPreconditionError& error) {
      LOG(WARNING) << "this training run is not profiled: " << error.what();
      unavailable_ = true;
      return;
    }
  }
  if (summarized_steps_ == 0) first_summarized_ = step_;
  step_start_ns_ = profiler::now_ns();
}

// The step that began at before_run ends at the next before_run (or at end), so that its
// time includes every hook's after_run: the checkpoint, the listeners, the logging.
void ProfilerHook::close_step(Run& run, int64_t end_ns) {
  int64_t start_ns = step_start_ns_;
  step_start_ns_ = -1;
  if (!session_) return;
  profiler::Profile profile = session_->collect();
  if (profile.dropped_events > 0) {
    LOG(WARNING) << "profiler: " << profile.dropped_events
                 << " events of a step were dropped (more than 2^18 on one thread)";
  }
  if (options_.every_n_steps > 0) {
    builder_.add(profile);
    ++summarized_steps_;
    summarized_ns_ += end_ns - start_ns;
    if (summarized_steps_ == options_.every_n_steps) log_summary();
  }
  if (traces(step_)) {
    if (first_traced_ < 0) first_traced_ = step_;
    int tid = static_cast<int>(::gettid());
    profiler::Profile step;
    step.events.push_back({profiler::intern(str_cat("step ", step_)), profiler::kStep, tid,
                           start_ns - session_->origin_ns(), end_ns - start_ns});
    step.thread_names[tid] = "training loop";
    profile.append(std::move(step));
    trace_.append(std::move(profile));
    if (run.global_step() >= options_.trace_steps->second) write_trace(run);
  }
}

void ProfilerHook::log_summary() {
  last_summary_ = builder_.summarize(summarized_steps_, summarized_ns_, options_.top_ops);
  LOG(INFO) << "up to global step " << first_summarized_ + summarized_steps_ << ", "
            << last_summary_->to_string();
  builder_.clear();
  summarized_steps_ = 0;
  summarized_ns_ = 0;
}

void ProfilerHook::write_trace(Run& run) {
  trace_done_ = true;
  if (first_traced_ < 0) return;
  std::string dir =
      options_.output_dir.empty() ? run.config().model_dir + "/profile" : options_.output_dir;
  std::string path = str_cat(dir, "/trace-", first_traced_, ".json");
  std::shared_ptr<Env> env = run.config().file_system();
  env->create_dir(dir);
  write_file_atomically(*env, path, profiler::chrome_trace_json(trace_, "cadre train"));
  LOG(INFO) << "profiler: a trace of the steps from global step " << first_traced_ << " to "
            << run.global_step() << " is in " << path
            << " (open it in https://ui.perfetto.dev or chrome://tracing)";
  traces_.push_back(path);
  trace_ = profiler::Profile();
}

void ProfilerHook::end(Run& run) {
  if (step_start_ns_ >= 0) close_step(run, profiler::now_ns());
  if (summarized_steps_ > 0) log_summary();
  if (!trace_done_ && first_traced_ >= 0) write_trace(run);
  session_.reset();
}

}  // namespace cadre
