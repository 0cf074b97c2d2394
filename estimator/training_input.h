// The input of a training run (Estimator::train): read as input shards or as one pipeline
// per worker, and moved to the position the checkpoint it resumes from saved.
#pragma once

#include <optional>

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

// Inputs with no rows shaped as those of the first step of this worker's input read from its
// start, as training_input() last read it (TrainLoop's steps with no examples, for a worker
// whose input ended before its first step). Not collective: the others are stepping. Nullopt
// when that input is empty.
std::optional<PerReplica<io::Element>> no_rows_from_start(const RunConfig& config,
                                                          const InputFn& input_fn,
                                                          const Strategy& strategy,
                                                          const TrainRun& run);

}  // namespace cadre::estimator_internal
