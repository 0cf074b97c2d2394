// What an input_fn learns about where its pipeline runs: how many pipelines feed the job,
// which one this is, and how many replicas share each global batch.
#pragma once

#include <cstdint>

namespace cadre::io {

struct InputContext {
  // Input pipelines in the job (usually one per worker) and this one's index; a pipeline
  // reads the shard input_pipeline_id of num_input_pipelines.
  int num_input_pipelines = 1;
  int input_pipeline_id = 0;
  // Replicas that consume one global batch together, across all workers.
  int num_replicas_in_sync = 1;

  // global_batch_size / num_replicas_in_sync. Throws InvalidArgumentError when the global
  // batch does not divide evenly (naming both numbers).
  int64_t per_replica_batch_size(int64_t global_batch_size) const;
};

}  // namespace cadre::io

namespace cadre {
using io::InputContext;
}  // namespace cadre
