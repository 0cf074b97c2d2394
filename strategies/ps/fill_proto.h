// Initial values that ps tasks compute themselves (ps.proto's InitialFill) from the chief's
// description of a built-in initializer (core/nn/initial_fill.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "cadre/tensor/tensor.h"
#include "core/nn/initial_fill.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

// `fill` for a target (a slice) whose first element within the whole value is `first_element`.
void to_proto(const nn::InitialFill& fill, int64_t first_element, InitialFill* out);
// The value of `dtype` and `shape` that `fill` describes, computed on the host in runs of
// about kFillChunkBytes. InvalidArgumentError naming `what` for an unknown kind, a negative
// first element, or a random kind of a dtype other than float32 and float64.
Tensor filled(const InitialFill& fill, DType dtype, const Shape& shape, std::string_view what);

}  // namespace cadre::ps
