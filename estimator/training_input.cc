#include "estimator/training_input.h"

#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "estimator/worker_states.h"
#include "io/virtual_shards.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// Restores this worker's input position unless the checkpoint has none for it or the
// pipeline changed since, in which case the input starts over (TensorFlow never restores it
// at all).
void restore_input(DistributedIterator& iterator, const checkpoint::CheckpointReader& reader,
                   const Strategy& strategy) {
  if (reader.iterator_state(/*verify=*/false).empty()) return;
  std::string why;
  std::optional<SavedInput> saved =
      input_state_of(reader, strategy.worker_index(), strategy.num_workers(), &why);
  if (!saved) {
    LOG(WARNING) << "worker " << strategy.worker_index() << ": " << why;
    return;
  }
  try {
    iterator.restore(saved->state);
  } catch (const InvalidArgumentError& error) {
    LOG(WARNING) << "the input pipeline differs from the one checkpointed in " << reader.path()
                 << " (" << error.what() << "); reading the input from its start";
    return;
  }
  // Batches an elastic group took from this worker after its position was saved: they
  // count, so they are not read again.
  int64_t skipped = 0;
  while (skipped < saved->batches_behind && iterator.next()) ++skipped;
  if (skipped > 0) {
    LOG(INFO) << "worker " << strategy.worker_index() << ": skipped the " << skipped
              << " batch(es) its group took from it after " << reader.path();
  }
}

// The input shards to read the input as: a checkpoint's own number (its positions are per
// shard), else RunConfig's; none for workers that step on their own, whose positions are not
// kept.
int64_t input_shards(const RunConfig& config, const checkpoint::CheckpointReader* resume,
                     const Strategy& strategy) {
  int64_t shards = config.input_shards;
  if (resume) {
    if (int64_t saved = io::saved_virtual_shards(resume->iterator_state(/*verify=*/false))) {
      if (shards != 0 && shards != saved) {
        LOG(WARNING) << "RunConfig.input_shards is " << shards << "; reading the input as the "
                     << saved << " input shards of " << resume->path();
      }
      shards = saved;
    }
  }
  if (strategy.num_workers_in_sync() != strategy.num_workers()) {
    if (shards > 0) {
      LOG(WARNING) << "input shards apply to workers that step together; " << strategy.name()
                   << "'s workers each read their own part of the input";
    }
    return 0;
  }
  // A worker that cannot see the chief's checkpoints reads the input as the chief does.
  // (Only among workers: a parameter-server strategy's broadcast_from_chief sets the global
  // step on ps 0.)
  if (strategy.num_workers_in_sync() <= 1) return shards;
  return strategy.extended().broadcast_from_chief(shards);
}

}  // namespace

DistributedIterator training_input(const RunConfig& config, const InputFn& input_fn,
                                   const Strategy& strategy,
                                   const checkpoint::CheckpointReader* resume, TrainRun& run) {
  int64_t shards = input_shards(config, resume, strategy);
  if (config.deterministic && shards == 0) {
    throw InvalidArgumentError(
        "RunConfig.deterministic needs input shards (RunConfig.input_shards, dividing the "
        "global batch) and workers that step together");
  }
  DistributedIterator iterator = (shards > 0 ? strategy.distribute_datasets_from_function(
                                                   input_fn, shards, config.deterministic)
                                             : strategy.distribute_datasets_from_function(input_fn))
                                     .make_iterator();
  if (config.deterministic) {
    run.reduce_in_shard_order(
        io::owned_shards(shards, strategy.num_workers(), strategy.worker_index()).first, shards);
  }
  if (resume) restore_input(iterator, *resume, strategy);
  return iterator;
}

}  // namespace cadre::estimator_internal
