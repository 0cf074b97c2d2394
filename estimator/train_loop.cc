#include "estimator/train_loop.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "estimator/group_steps.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// Examples in a replica's batch: the labels' first dimension, else a feature's.
int64_t batch_rows(const io::Element& element) {
  if (element.labels.defined() && element.labels.rank() > 0) return element.labels.shape()[0];
  for (const auto& [name, feature] : element.features) {
    if (feature.rank() > 0) return feature.shape()[0];
  }
  return 1;
}

// The line a training run starts with: the strategy, its replicas and devices, the batch
// per replica and how gradients are combined.
std::string plan_line(const Strategy& strategy, const PerReplica<io::Element>& batch,
                      bool deterministic) {
  int64_t smallest = batch_rows(batch[0]), largest = smallest, local = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    int64_t rows = batch_rows(batch[r]);
    smallest = std::min(smallest, rows);
    largest = std::max(largest, rows);
    local += rows;
  }
  std::string per_replica =
      smallest == largest ? std::to_string(smallest) : str_cat(smallest, "-", largest);
  std::string workers =
      strategy.num_workers() > 1 ? str_cat(" on each of ", strategy.num_workers(), " workers") : "";
  return str_cat("strategy ", strategy.name(), ": ", strategy.topology(), workers, "; batch ",
                 per_replica, " per replica (", local * strategy.num_workers_in_sync(),
                 " per step); gradients: ",
                 deterministic ? "summed per input shard, in shard order (deterministic)"
                               : strategy.extended().reduction());
}

}  // namespace

TrainLoop::TrainLoop(const RunConfig& config, TrainRun& run, DistributedIterator& iterator,
                     Hooks& hooks, const Strategy& strategy, StopNotice& notice,
                     std::function<std::optional<PerReplica<io::Element>>()> first_batch)
    : config_(config),
      run_(run),
      iterator_(iterator),
      hooks_(hooks),
      strategy_(strategy),
      notice_(notice),
      first_batch_(std::move(first_batch)) {
  if (config.intra_op_autotune && !config.deterministic && strategy.num_workers_in_sync() == 1) {
    tuner_.emplace(intra_op_threads_budget());
  }
}

void TrainLoop::run() {
  EstimatorSpec spec;
  std::optional<PerReplica<io::Element>> held;  // a late joiner's first batch
  bool finished = false;                        // by the others, before this one joined
  bool in_group = true;                         // a late joiner whose input had ended did not join
  if (strategy_.extended().joining_late()) {
    held = step_alone_then_join(run_, iterator_, spec, finished);
    in_group = held.has_value();
  }
  while (!finished) {
    RunContext context;
    if (heed_notice()) break;
    for (const auto& hook : hooks_) hook->before_run(run_, context);
    if (context.stop_requested()) break;  // before the step (a coordinator-mode worker's gate)
    if (!held) run_.before_batch();
    std::optional<PerReplica<io::Element>> batch = held ? std::move(held) : iterator_.next();
    held.reset();
    const bool rows = batch && static_cast<int>(batch->size()) >= strategy_.num_local_replicas();
    if (!rows) batch = in_group ? no_rows() : std::nullopt;
    if (!batch) {
      LOG(INFO) << "the training input ended at step " << run_.global_step();
      input_ended_ = true;
      break;
    }
    if (first_ && rows) LOG(INFO) << plan_line(strategy_, *batch, config_.deterministic);
    GroupStep stepped = step_in_group(run_, *batch, spec);
    if (stepped.finished) break;
    if (run_.every_input_ended()) {
      LOG(INFO) << "the training input of every worker ended at step " << run_.global_step();
      input_ended_ = true;
      break;
    }
    if (!stepped.result) continue;  // another member finished it: its hooks ran there
    if (run_.refused_for_new_client()) continue;
    StepResult& result = *stepped.result;
    time_step();
    // Every worker that steps with this one hears a planned stop after the same step.
    if (stepped.signals & StrategyExtended::kStop) run_.begin_planned_stop();
    if (first_) add_spec_hooks(spec);
    first_ = false;
    for (const auto& hook : hooks_) hook->after_run(run_, result, context);
    if (context.stop_requested() || run_.planned_stop()) break;
  }
}

std::optional<PerReplica<io::Element>> TrainLoop::no_rows() {
  // A reduction in shard order needs every shard's rows each step (its input ends with
  // its first shard).
  if (strategy_.num_workers_in_sync() <= 1 || config_.deterministic) return std::nullopt;
  std::optional<PerReplica<io::Element>> none = iterator_.no_rows();
  if (!none) {
    // Ended before its first step: shapes from the input's start, read once.
    if (!from_start_) from_start_ = first_batch_();
    none = from_start_;
  }
  if (!none) return std::nullopt;
  if (!told_no_rows_) {
    told_no_rows_ = true;
    LOG(INFO) << "worker " << strategy_.worker_index() << ": its training input ended at step "
              << run_.global_step()
              << "; it steps with no examples until every worker's input has ended";
  }
  return none;
}

bool TrainLoop::heed_notice() {
  if (stop_raised_ || !notice_.requested()) return false;
  stop_raised_ = true;
  const bool in_sync = strategy_.num_workers_in_sync() > 1;
  LOG(WARNING) << notice_.reason() << ": a planned stop after step " << run_.global_step()
               << (in_sync ? " and one more, which tells the workers stepping with this one" : "")
               << (config_.is_chief ? "; then a checkpoint of it" : "");
  if (in_sync) {
    strategy_.extended().raise_step_signal(StrategyExtended::kStop);
    return false;
  }
  strategy_.extended().announce_planned_stop();
  run_.begin_planned_stop();
  return true;
}

void TrainLoop::time_step() {
  if (!tuner_) return;
  auto now = std::chrono::steady_clock::now();
  if (!first_) tuner_->step_finished(std::chrono::duration<double>(now - last_step_end_).count());
  last_step_end_ = now;
}

void TrainLoop::add_spec_hooks(const EstimatorSpec& spec) {
  if (spec.training_hooks.empty()) return;
  for (const auto& hook : spec.training_hooks) {
    hook->begin(run_);
    hook->after_create(run_);
  }
  hooks_.insert(hooks_.begin() + 1, spec.training_hooks.begin(), spec.training_hooks.end());
}

}  // namespace cadre::estimator_internal
