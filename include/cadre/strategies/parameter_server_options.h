// How ParameterServerStrategy places variables on the ps tasks of a cluster and talks to
// them.
#pragma once

#include <cstdint>

namespace cadre {

namespace ps {

// Where each variable goes: on the least-loaded ps task by bytes (greedy) or round robin;
// a variable large enough is cut into row slices on several ps tasks (TensorFlow's
// min_max_variable_partitioner). Whatever these say, no slice is larger than a quarter of
// ParameterServerOptions.max_message_bytes: a larger variable gets as many slices as that
// takes, several per ps task when needed, so that variables of any size train.
struct PlacementOptions {
  enum class Policy { kGreedy, kRoundRobin };
  Policy policy = Policy::kGreedy;
  // A variable is cut into row slices of at least this many bytes each, one per ps task at
  // most (and at most max_shards; 0: no limit but the ps count), unless it needs more to
  // fit messages.
  int64_t min_slice_bytes = 256 << 10;
  int max_shards = 0;
};

}  // namespace ps

struct ParameterServerOptions {
  ps::PlacementOptions placement;
  // The largest message to or from a ps task: a transport detail, since variables are
  // sliced and transfers batched to fit. Only a single row of a variable larger than about
  // this does not fit (InternalError naming the variable).
  int64_t max_message_bytes = int64_t{256} << 20;
  double connect_timeout_seconds = 300;  // for every ps task to answer at start-up
  double init_timeout_seconds = 300;     // for the chief's variables and optimizer state
  double rpc_timeout_seconds = 60;       // for each pull and push
  // > 0: gradients computed on variables more than this many global steps old are dropped
  // (the ps reports it, and the worker goes on with fresh variables).
  int64_t max_staleness = 0;
  // Checkpoints of variables (without slots) of at least this many bytes on the ps tasks
  // are sharded: each ps task writes its own part into the model_dir, in parallel and while
  // training goes on, and the chief commits them (checkpoint/FORMAT.md, Sharded
  // checkpoints). Smaller ones are one file the chief writes after reading the variables
  // from the ps tasks, cheaper for a few megabytes. 0: always sharded (TensorFlow's
  // Estimator shards every parameter-server checkpoint); negative: never.
  int64_t sharded_checkpoint_min_bytes = int64_t{16} << 20;
  // On restore, each ps task reads its own rows of the embedding tables (row-access
  // variables) and their slots from the checkpoint in the model_dir, which the chief only
  // names, as TensorFlow's restore ops run on the ps devices: no process reads a table whole.
  // False, or a ps task that cannot read the checkpoint (no model_dir, or not the chief's
  // file system): the chief reads them and sends each task its rows.
  bool restore_on_ps_tasks = true;
};

}  // namespace cadre
