// Internal to Cadre: the files of sharded checkpoints (FORMAT.md, Sharded checkpoints). A
// part is an ordinary checkpoint file that one task writes into the model_dir itself; the
// chief's file of the checkpoint, published last, names every part with its size and
// CRC-32C, so that a part without a published manifest is never read, and is removed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "cadre/base/env.h"
#include "cadre/checkpoint/contents.h"

namespace cadre::checkpoint {

// "model.ckpt-100.part-1-of-2.5f3a9c01.h5": part 1 of 2 of step 100, of the save `save_id`.
std::string part_file_name(const std::string& basename, int64_t step, int index, int count,
                           const std::string& save_id);
// The step of a published part's file name, nullopt for any other name (temporaries too).
std::optional<int64_t> part_step(const std::string& file_name, const std::string& basename);

struct WrittenPart {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Rows [begin, end) of a tensor, copied contiguously into `destination`, at the time the
// writer needs them: a part is streamed from a task's copy-on-write snapshot instead of from
// a full copy. The writer asks for each tensor's rows in order, from row 0, each range once.
using RowSource = std::function<void(int64_t begin, int64_t end, void* destination)>;
// Row sources by the name of the tensor in CheckpointData::variables they replace. That
// tensor then only gives the dtype and shape (a broadcast view of one row will do) and its
// memory is never read; it must have rank 1 or more.
using RowSources = std::map<std::string, RowSource>;
// Rows [begin, end) of a tensor handed over where they lie: the source calls `write` once,
// with the rows contiguous at the pointer it gives, which stays valid (and unchanged) for
// the call. A part written through from live variables gives each block from the variable's
// own memory, or from the copy of it that an update made first. The writer asks for each
// range once, up to two ranges at a time.
using RowsInPlace =
    std::function<void(int64_t begin, int64_t end, const std::function<void(const void*)>& write)>;
// As RowSources: by the name of the tensor in CheckpointData::variables they replace.
using RowsInPlaceSources = std::map<std::string, RowsInPlace>;

// Writes `data` as model_dir/file_name, durably: a temporary beside it, fsynced, renamed,
// model_dir fsynced. Returns the file's size and the CRC-32C of its bytes. Throws
// InvalidArgumentError for a file name that is not a part's, and the writer's errors (the
// temporary is removed), among them a row source's.
WrittenPart write_part_file(const std::string& model_dir, const std::string& file_name,
                            const CheckpointData& data, const RowSources& sources = {},
                            const RowsInPlaceSources& in_place = {});

// The CRC-32C of the bytes of the file at `path` (read in 2 MiB blocks), and its size.
// Throws NotFoundError or DataLossError naming it when it cannot be read.
WrittenPart file_checksum(const std::string& path);

// Removes the part files of the checkpoint of `step` but those named in `keep`; a failure is
// logged.
void remove_parts(Env& env, const std::string& model_dir, const std::string& basename, int64_t step,
                  const std::set<std::string>& keep = {});
// Removes the part files whose checkpoint was never published (a save interrupted on any
// task); a failure is logged. Only for the model_dir's one writer, with no save in flight.
void remove_orphan_parts(Env& env, const std::string& model_dir, const std::string& basename);

}  // namespace cadre::checkpoint
