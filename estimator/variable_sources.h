// Where the tasks that hold a resumed run's variables read them themselves (parameter
// servers: each ps task its rows of the embedding tables and their slots), so that the chief,
// or coordinator mode's client, only names the checkpoint and never reads a table whole.
// Internal to the estimator module.
#pragma once

#include <memory>

#include "cadre/checkpoint/reader.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {

// The variables' sources in `resume`, a file of model_dir whose name the tasks are told;
// none (the restoring process reads every variable) without a checkpoint, or for a
// TensorFlow one.
VariableSourceFn variable_sources_in(std::shared_ptr<const checkpoint::CheckpointReader> resume);

}  // namespace cadre::estimator_internal
