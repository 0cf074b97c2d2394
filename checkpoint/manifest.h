// Internal to the checkpoint module: the manifest of a sharded checkpoint (FORMAT.md,
// Sharded checkpoints), which the chief's own file of the checkpoint holds beside its own
// data: every part's file name, size and CRC-32C, and where each row of each logical
// variable and slot is.
#pragma once

#include <hdf5.h>

#include <map>
#include <string>
#include <vector>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/writer.h"
#include "checkpoint/parts.h"

namespace cadre::checkpoint::internal {

// Groups and attributes of the manifest.
inline constexpr char kParts[] = "parts";
inline constexpr char kSharded[] = "sharded";
inline constexpr char kFileAttribute[] = "file";
inline constexpr char kBytesAttribute[] = "bytes";
inline constexpr char kVariableDtypeAttribute[] = "variable_dtype";
inline constexpr char kVariableShapeAttribute[] = "variable_shape";

// Checks that the parts' slices describe whole logical variables: consistent dtypes, shapes
// and slots, rows covered once in order, names valid and none also among data's own
// variables. Throws InvalidArgumentError listing every problem.
void check_parts(const CheckpointData& data);

// Writes `data`'s own contents as write_checkpoint_file does, and the manifest of its parts
// (written[k] the size and CRC-32C of part k), as format version 2.
void write_sharded_checkpoint_file(const std::string& path, const CheckpointData& data,
                                   const std::vector<WrittenPart>& written,
                                   const WriteOptions& options);

// "[8388608, 32]", and back (DataLossError naming `context` for anything else).
std::string shape_text(const Shape& shape);
Shape parse_shape_text(const std::string& text, const std::string& context);

}  // namespace cadre::checkpoint::internal
