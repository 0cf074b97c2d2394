#include "estimator/training_input.h"

#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "estimator/ps_input_positions.h"
#include "estimator/worker_states.h"
#include "io/virtual_shards.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// Restores a saved position of this worker's input, unless the pipeline changed since, in
// which case the input starts over (TensorFlow never restores it at all). `from` names where
// the position was kept.
void restore_input(DistributedIterator& iterator, const SavedInput& saved, const std::string& from,
                   const Strategy& strategy) {
  try {
    iterator.restore(saved.state);
  } catch (const InvalidArgumentError& error) {
    LOG(WARNING) << "the input pipeline differs from the one whose position " << from << " holds ("
                 << error.what() << "); reading the input from its start";
    return;
  }
  // Batches taken from this worker after its position was saved (by an elastic group it has
  // left since, or by its own pushes to the ps tasks): they count, so they are not read again.
  int64_t skipped = 0;
  while (skipped < saved.batches_behind && iterator.next()) ++skipped;
  if (skipped > 0) {
    LOG(INFO) << "worker " << strategy.worker_index() << ": skipped the " << skipped
              << " batch(es) taken from it after " << from;
  }
}

// This worker's position in `reader`'s checkpoint, if it has one that fits this job.
std::optional<SavedInput> checkpoint_position(const checkpoint::CheckpointReader& reader,
                                              const Strategy& strategy) {
  if (reader.iterator_state(/*verify=*/false).empty()) return std::nullopt;
  std::string why;
  std::optional<SavedInput> saved =
      input_state_of(reader, strategy.worker_index(), strategy.num_workers(), &why);
  if (!saved) LOG(WARNING) << "worker " << strategy.worker_index() << ": " << why;
  return saved;
}

// This worker's input from its start, read as `shards` input shards (0: a pipeline per worker).
DistributedIterator input_from_start(const RunConfig& config, const InputFn& input_fn,
                                     const Strategy& strategy, int64_t shards) {
  return (shards > 0
              ? strategy.distribute_datasets_from_function(input_fn, shards, config.deterministic)
              : strategy.distribute_datasets_from_function(input_fn))
      .make_iterator();
}

// The input shards to read the input as: a checkpoint's own number (its positions are per
// shard), else RunConfig's; none for workers that step on their own and whose positions are
// not kept (coordinator mode).
int64_t input_shards(const RunConfig& config, const checkpoint::CheckpointReader* resume,
                     const Strategy& strategy, bool positions_on_ps) {
  int64_t shards = config.input_shards;
  if (resume) {
    if (int64_t saved = virtual_shards_in(resume->iterator_state(/*verify=*/false))) {
      if (shards != 0 && shards != saved) {
        LOG(WARNING) << "RunConfig.input_shards is " << shards << "; reading the input as the "
                     << saved << " input shards of " << resume->path();
      }
      shards = saved;
    }
  }
  if (strategy.num_workers_in_sync() != strategy.num_workers() && !positions_on_ps) {
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
  int64_t shards = input_shards(config, resume, strategy, run.positions_on_ps());
  if (config.deterministic &&
      (shards == 0 || strategy.num_workers_in_sync() != strategy.num_workers())) {
    throw InvalidArgumentError(
        "RunConfig.deterministic needs input shards (RunConfig.input_shards, dividing the "
        "global batch) and workers that step together");
  }
  run.set_input_shards(shards);
  DistributedIterator iterator = input_from_start(config, input_fn, strategy, shards);
  if (config.deterministic) {
    run.reduce_in_shard_order(
        io::owned_shards(shards, strategy.num_workers(), strategy.worker_index()).first, shards);
  }
  // A parameter-server worker restarted while the job ran on reads on from what its pushes
  // took since the checkpoint, which ps 0 counted.
  if (run.positions_on_ps() && !config.is_chief) {
    if (std::optional<SavedInput> kept = position_on_ps(strategy)) {
      restore_input(iterator, *kept, "the position ps 0 kept", strategy);
      return iterator;
    }
  }
  if (resume) {
    if (std::optional<SavedInput> saved = checkpoint_position(*resume, strategy)) {
      restore_input(iterator, *saved, resume->path(), strategy);
    }
  }
  return iterator;
}

std::optional<PerReplica<io::Element>> no_rows_from_start(const RunConfig& config,
                                                          const InputFn& input_fn,
                                                          const Strategy& strategy,
                                                          const TrainRun& run) {
  DistributedIterator start = input_from_start(config, input_fn, strategy, run.input_shards());
  start.next();
  return start.no_rows();
}

}  // namespace cadre::estimator_internal
