// Training steps in an elastic MultiWorkerMirrored group (strategies/cluster/elastic_group.h),
// whose members change while it trains: how a step goes on when they do, and how a worker
// restarted into the running group joins it.
#pragma once

#include <optional>

#include "cadre/estimator/hooks.h"
#include "cadre/estimator/model_fn.h"
#include "cadre/strategies/distributed_dataset.h"
#include "estimator/train_run.h"

namespace cadre::estimator_internal {

struct GroupStep {
  std::optional<StepResult> result;  // null: no step of this worker's for its hooks
  unsigned signals = 0;              // the step's (StrategyExtended::take_step_signal)
  bool finished = false;             // the others finished training without this worker
};

// One step of `run` on `batch`. When the members change (at the step boundary, or breaking
// the step's collectives) they join the group's next generation and take the state of the
// one that stepped furthest; the batch is stepped again unless one finished the step (with
// every member's gradients): then no result, and the caller's hooks skip the step. Without
// an elastic group, run.step and its signals.
GroupStep step_in_group(TrainRun& run, const PerReplica<io::Element>& batch, EstimatorSpec& spec);

// A worker restarted into a running group steps alone on its first batch, which makes its
// optimizer's slots as the members' are, then joins them and takes their state; returns
// that batch, to step with them (nullopt when the input is empty, or when the members
// finished training meanwhile: `finished`).
std::optional<PerReplica<io::Element>> step_alone_then_join(TrainRun& run,
                                                            DistributedIterator& iterator,
                                                            EstimatorSpec& spec, bool& finished);

}  // namespace cadre::estimator_internal
