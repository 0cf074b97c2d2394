// ProfilerHook: where training spends its time, as TensorFlow's ProfilerHook and
// TensorBoard's profiler show it.
//
// Every `every_n_steps` steps it logs one summary of those steps: the time per step of each
// phase (input, forward, backward, all_reduce, update, checkpoint, saving_listeners, and
// "other": the hooks and the loop) and the kernels that took the most time (calls, ms per
// step, share of all kernel time). For the steps that start at a global step in
// `trace_steps` = [first, last), it writes a Chrome trace (trace event JSON) of every scope
// of every thread to `output_dir/trace-<step>.json`, <step> the first step traced; open it in
// https://ui.perfetto.dev or chrome://tracing.
//
// The Estimator adds one from RunConfig::profile_every_n_steps and profile_trace_steps, after
// its built-in hooks; only the chief writes traces (workers write nothing to model_dir). One
// passed in TrainArgs::hooks runs before the built-in hooks, so the checkpoint train() saves
// when it ends (CheckpointSaverHook::end) falls outside its last step. The profiler records only
// while a summary is due or a traced step runs; one run at a time records in a process (a
// second logs a warning and is not profiled).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cadre/estimator/hooks.h"
#include "cadre/runtime/profiler.h"

namespace cadre {

struct ProfilerOptions {
  int64_t every_n_steps = 0;  // a summary in the log every this many steps; 0: none
  // The global steps [first, last) to trace; unset: none.
  std::optional<std::pair<int64_t, int64_t>> trace_steps{};
  // Where traces go; empty: model_dir/profile.
  std::string output_dir{};
  bool write_traces = true;  // false on tasks that write nothing (the Estimator's workers)
  int top_ops = 10;          // kernels listed in a summary
};

class ProfilerHook : public Hook {
 public:
  // Throws InvalidArgumentError naming the field: every_n_steps < 0, trace_steps with
  // first < 0 or last <= first, top_ops < 1.
  explicit ProfilerHook(ProfilerOptions options);
  ~ProfilerHook() override;

  void begin(Run& run) override;
  void before_run(Run& run, RunContext& context) override;
  void end(Run& run) override;

  // The summary most recently logged, if any.
  const std::optional<profiler::Summary>& last_summary() const { return last_summary_; }
  // Paths of the traces written, oldest first.
  const std::vector<std::string>& traces_written() const { return traces_; }

 private:
  void close_step(Run& run, int64_t end_ns);
  void log_summary();
  void write_trace(Run& run);
  bool traces(int64_t step) const;  // the step starting at `step` goes into a trace
  bool wants(int64_t step) const;   // the profiler records the step starting at `step`

  ProfilerOptions options_;
  std::unique_ptr<profiler::ProfilerSession> session_;
  bool unavailable_ = false;    // another session was recording when this one wanted to
  int64_t step_start_ns_ = -1;  // of the open step, when one is open
  int64_t step_ = 0;            // the global step the open step started at
  int64_t first_summarized_ = 0;
  int64_t summarized_steps_ = 0;
  int64_t summarized_ns_ = 0;
  profiler::SummaryBuilder builder_;
  std::optional<profiler::Summary> last_summary_;
  profiler::Profile trace_;
  int64_t first_traced_ = -1;
  bool trace_done_ = false;
  std::vector<std::string> traces_;
};

}  // namespace cadre
