// Sharded checkpoints under a strategy whose workers all hold every variable
// (MultiWorkerMirrored): after a step whose checkpoint the chief announced, every worker
// starts writing its share of the variables and slots as a part of that checkpoint, from a
// snapshot, in the background (checkpoint/worker_parts.h); the chief's save names the parts,
// and its CheckpointManager waits until each worker has told, through the strategy's part
// store, that its part is durable before it commits the manifest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/checkpoint/contents.h"
#include "cadre/nn/variable_store.h"
#include "checkpoint/worker_parts.h"

namespace cadre {
class StrategyExtended;
}

namespace cadre::estimator_internal {

class WorkerParts {
 public:
  // Null when the strategy has no worker write a part for the variables of `store` (without
  // their slots), the same on every worker. `extended` must outlive the result. Otherwise its
  // writer starts faulting in the memory of this worker's first snapshot, shaped after
  // `store` as it is now (slots included once made), off the calling thread. Created a while
  // before the first save, that save's copy then costs what a later one's does, which goes
  // into the one before's memory: no page faults for the update that claims part of it
  // (docs/BENCHMARKS.md, #46). Created at the first save, that save goes as without it.
  static std::unique_ptr<WorkerParts> create(const StrategyExtended& extended,
                                             const nn::VariableStore& store, std::string model_dir,
                                             std::string task);
  WorkerParts(const StrategyExtended& extended, int count, std::string model_dir, std::string task);

  // On every worker after the step that reached `step` when the chief announced its
  // checkpoint (collective: the workers agree on the parts' names). Waits for this worker's
  // part before, then snapshots its share of `store` and writes it in the background.
  void start(const nn::VariableStore& store, int64_t step);
  // The chief's save of `step`: the parts start() began for it, each with a wait that returns
  // once its worker has written it, or throws that worker's error (or the cluster's failure).
  // False, and nothing added, when no parts of `step` were started (the chief saves whole).
  bool take(int64_t step, std::vector<checkpoint::CheckpointPart>* parts);

 private:
  const StrategyExtended& extended_;
  const int count_;
  const std::string model_dir_, task_;
  // The chief's: the parts of the last start(), for take().
  int64_t started_step_ = -1;
  std::vector<checkpoint::CheckpointPart> started_;
  // nn::deferred_copy_blocked_seconds() and nn::deferred_copy_wait_seconds() at the last
  // start() (negative before the first).
  double blocked_at_start_ = -1, waited_at_start_ = 0;
  // Last: its threads report to the store of extended_.
  checkpoint::WorkerPartWriter writer_;
};

}  // namespace cadre::estimator_internal
