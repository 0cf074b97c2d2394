// Gathering and scattering rows, and one-hot encoding.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

// params: contiguous [outer, rows, inner]; indices: contiguous int32/int64 [n], each in
// [0, rows) (checked by the caller); out: [outer, n, inner].
using GatherFn = void(const Tensor& params, const Tensor& indices, Tensor& out);
// target: contiguous [outer, rows, inner], updated in place: target[o, indices[i], :] +=
// updates[o, i, :]. Repeated indices accumulate.
using ScatterAddFn = void(const Tensor& indices, const Tensor& updates, Tensor& target);
// indices: int32/int64 of any shape; out: indices.shape + [depth]. Out-of-range indices
// give a row of off_value, as in TensorFlow.
using OneHotFn = void(const Tensor& indices, double on_value, double off_value, Tensor& out);
// Index checks: returns the position of the first index outside [0, limit), or -1.
using FindBadIndexFn = int64_t(const Tensor& indices, int64_t limit);

extern KernelSlot<GatherFn> gather;
extern KernelSlot<ScatterAddFn> scatter_add;
extern KernelSlot<OneHotFn> one_hot;
extern KernelSlot<FindBadIndexFn> find_bad_index;

}  // namespace cadre::kernels
