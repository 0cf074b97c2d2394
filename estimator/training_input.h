// The input of a training run (Estimator::train): read as input shards or as one pipeline
// per worker, and moved to the position the checkpoint it resumes from saved.
#pragma once

#include "cadre/checkpoint/reader.h"
#include "cadre/estimator/run_config.h"
#include "cadre/io/input_fn.h"
#include "cadre/strategies/distributed_dataset.h"
#include "cadre/strategies/strategy.h"
#include "estimator/train_run.h"

namespace cadre::estimator_internal {

// The input of `run`, whose deterministic steps it tells their shards; at `resume`'s input
// position when it has one for this worker (else from the start, saying why). Throws
// InvalidArgumentError for deterministic steps without input shards.
DistributedIterator training_input(const RunConfig& config, const InputFn& input_fn,
                                   const Strategy& strategy,
                                   const checkpoint::CheckpointReader* resume, TrainRun& run);

}  // namespace cadre::estimator_internal
