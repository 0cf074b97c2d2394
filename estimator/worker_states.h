// What only each worker of a synchronous multi-worker run knows, its input position and its
// replicas' random streams: gathered to the chief for a checkpoint, so that every worker
// resumes exactly where it was (TensorFlow saves the chief's position at most).
//
// In a checkpoint, worker w's input state is under "input_pipeline_<w>/" (the chief's, w = 0,
// as in a single-worker checkpoint, unprefixed), its generators under their replicas' global
// names, and the attribute "input_pipelines" says how many workers read the input.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/io/iterator_state.h"
#include "cadre/random/generator.h"

namespace cadre::estimator_internal {

struct WorkerState {
  io::IteratorState input;
  std::map<std::string, Generator::State> generators;  // by global replica name
};

std::string encode_worker_state(const WorkerState& state);
// DataLossError naming `what` when the bytes are not an encoded WorkerState.
WorkerState decode_worker_state(std::string_view bytes, const std::string& what);

// Adds worker `worker`'s state to checkpoint `data`, and records that `pipelines` workers
// read the input. `batches_behind`: the batches the worker gave an elastic group after its
// state was taken (it has left the group since), which its restore skips.
void add_worker_state(int worker, WorkerState state, checkpoint::CheckpointData* data,
                      int64_t batches_behind = 0);
void set_input_pipelines(int pipelines, checkpoint::CheckpointData* data);

// Worker `worker`'s (not the chief's) input position in `reader`'s checkpoint as the worker
// saved it (with the batches it is behind, if any), if the checkpoint has one and was written
// by `workers` workers.
std::optional<io::IteratorState> saved_worker_input(const checkpoint::CheckpointReader& reader,
                                                    int worker, int workers);

struct SavedInput {
  io::IteratorState state;
  int64_t batches_behind = 0;  // to skip once restored (virtual shards skip their own)
};

// The number of input shards the positions of a checkpoint's iterator state are in, or 0 when
// they are not in input shards: read from the chief's own position, else from any worker's
// (in coordinator mode, and in a ps job whose worker 0 never pushed, there is no position of
// worker 0's). DataLossError for a number out of range.
int64_t virtual_shards_in(const std::map<std::string, Tensor>& saved);

// The input position of worker `pipeline` of `pipelines` in `reader`'s checkpoint, or nullopt
// with the reason in `why`: the checkpoint has none for it, or was written by a job whose
// input was sharded over another number of workers (then every worker starts over). An input
// read as virtual shards gives every worker the positions of all shards, whatever the number
// of workers that saved them.
std::optional<SavedInput> input_state_of(const checkpoint::CheckpointReader& reader, int pipeline,
                                         int pipelines, std::string* why);

}  // namespace cadre::estimator_internal
