// Sharded checkpoints whose parts the tasks holding the variables write themselves (ps tasks,
// checkpoint/FORMAT.md), as the chief of a parameter-server job and coordinator mode's client
// save them: the saving process names the parts and waits for them, and holds none of the
// variables they hold. Internal to the estimator module.
#pragma once

#include <cstdint>
#include <memory>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/nn/variable_store.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {

// For the checkpoint of `step` that `manager` saves: where the strategy's tasks write parts of
// `variables` (StrategyExtended::checkpoint_parts), has them start, adds the parts to
// data->parts and returns the variables the caller saves itself; null where they write none
// (the caller saves variables_to_save whole).
std::shared_ptr<const nn::VariableStore> save_parts_of_tasks(
    const StrategyExtended& extended, DistributedVariables& variables,
    const checkpoint::CheckpointManager& manager, int64_t step, checkpoint::CheckpointData* data);

}  // namespace cadre::estimator_internal
