// Internal to Cadre: a task's own share of a restore, read by the task itself. A ps task
// reads the rows of the variables it holds straight from a checkpoint in model_dir (as
// TensorFlow's restore ops run on the ps devices), so that no process reads the whole model
// through its memory.
#pragma once

#include <cstdint>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "cadre/nn/variable.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checkpoint {

// The checkpoint's entry `from` for variable `spec`. Throws InvalidArgumentError naming the
// variable, the file and the problem when the checkpoint lacks it or holds it with another
// shape or dtype (a checkpoint of another model).
const VariableInfo& restorable(const CheckpointReader& reader, const nn::VariableSpec& spec,
                               const std::string& from);

// Reads rows [first_row, first_row + destination.dim(0)) of logical variable or slot `name`
// of checkpoint `file_name` in `model_dir` into `destination` (a host tensor), whatever the
// checkpoint's layout: single-file, or parts written under any number of tasks (each row
// read from the part that holds it; no more than the destination and a staging block in
// memory). Checksums are not verified: the chief chose the checkpoint with every checksum
// intact (open_latest_intact).
//
// Throws PermissionDeniedError when `file_name` is not a file directly in `model_dir` (a
// path, "..", or a link that leads out), FailedPreconditionError for an empty `model_dir`,
// NotFoundError when there is no such checkpoint or variable, InvalidArgumentError when the
// rows or the dtype do not fit it, DataLossError for a damaged file.
void read_own_rows(const std::string& model_dir, const std::string& file_name,
                   const std::string& name, int64_t first_row, const Tensor& destination);

}  // namespace cadre::checkpoint
