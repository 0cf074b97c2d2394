// Reading an input as a fixed number of virtual shards, so that a job can change its number
// of workers and still read every element once. Each shard is the whole pipeline over its own
// part of the input, with its own position (shuffle buffer, random stream, file offsets); a
// worker reads the shards it owns, and a resize hands whole shards, positions and all, to
// their new owners. Shard v's position is under "shard_<v>/" in the iterator state, so the
// states of all workers together hold every shard's once, whatever the number of workers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "cadre/io/dataset.h"

namespace cadre::io {

struct VirtualShards {
  Dataset dataset;
  // For the start-up log: "input shards 0-31 of 64 (the input_fn's own shard stage)".
  std::string plan;
};

// More shards than any job has workers, and each a pipeline of its own: a bound on what a
// checkpoint may ask for.
inline constexpr int64_t kMaxInputShards = 65536;

// The feature read_virtual_shards(..., part_rows = true) adds to each element: int64 [k], the
// rows each of the k shards gave, in shard order (for a reduction per shard).
inline constexpr char kShardRowsFeature[] = "_input_shard_rows";

// Shards [first, last) of `num_shards`, read from `dataset`, which an input_fn built for
// shard `first`. A shard(num_shards, first) stage of the pipeline's own is moved to each
// shard's index; a pipeline without one is divided at its sources: by files when every
// file-reading stage has at least num_shards files, else element by element right after each
// source. Each element joins the next element of every shard in shard order (features and
// labels concatenated along dimension 0: the step's share of the global batch), and the
// input ends when any shard ends; with `to_every_end` (the shards may be at different places
// after a resize) an element joins those of the shards that have not ended, and the input
// ends when all have. Throws InvalidArgumentError
// for a bad range.
VirtualShards read_virtual_shards(const Dataset& dataset, int64_t num_shards, int64_t first,
                                  int64_t last, bool part_rows = false, bool to_every_end = false);

// Where set_shards_behind keeps its counts: "<kShardsBehind>/shard_<v>".
inline constexpr char kShardsBehind[] = "behind";

// Marks every shard whose position `state` holds as `elements` more behind it: restoring the
// state then skips that many elements of each shard. (An elastic group stepped on with a
// worker's batches after its position was saved, until the worker left.)
void set_shards_behind(IteratorState& state, int64_t elements);

// The number of shards a state saved by such an input names at its top, or 0 when the state
// is not one of virtual shards. DataLossError for a number out of range.
int64_t saved_virtual_shards(const IteratorState& state);

// The shards worker `worker` of `workers` owns: a contiguous range, so that the workers'
// shares in worker order are the shards in shard order. Empty when there are more workers
// than shards.
std::pair<int64_t, int64_t> owned_shards(int64_t num_shards, int64_t workers, int64_t worker);

}  // namespace cadre::io
