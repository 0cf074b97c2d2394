// Reductions over the middle axis of a contiguous [outer, reduced, inner] tensor.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

enum class ReduceOp { kSum, kMean, kMax, kMin, kAny, kAll };
enum class ArgReduceOp { kArgMax, kArgMin };

// x: contiguous [outer, reduced, inner]; out: contiguous [outer, inner] of x's dtype (bool
// for kAny/kAll). Sums combine partial results in an order fixed by the shape alone.
using ReduceFn = void(ReduceOp op, const Tensor& x, Tensor& out);
// out: int64 [outer, inner], the first index of the extreme value (NaN counts as extreme).
using ArgReduceFn = void(ArgReduceOp op, const Tensor& x, Tensor& out);

extern KernelSlot<ReduceFn> reduce;
extern KernelSlot<ArgReduceFn> arg_reduce;

}  // namespace cadre::kernels
