// CUDA reductions over the middle axis of a contiguous [outer, n, inner] tensor.
//
// A block of 256 threads is bx lanes along `inner` (bx a power of two up to 32, so that a
// warp reads consecutive elements) by 256/bx rows along n; each thread combines every
// (256/bx)-th row, then the block combines its rows in a fixed tree. When the output alone
// would give the GPU too few blocks, the n axis is split into chunks whose partial results
// a second pass combines. The split depends on the shape only, so results are the same
// bits from run to run.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/reduce_ops.h"
#include "core/kernels/reduction.h"

namespace cadre::backend::cuda {
namespace {

using kernels::ArgReduceOp;
using kernels::ReduceOp;
namespace p = portable;

// Blocks that keep every SM of a large GPU busy; a property of the launch, not the device.
constexpr int64_t kTargetBlocks = 512;
constexpr int64_t kMaxGridY = 65535;

// kFinal: write finish(acc) as Out; else write the chunk's accumulator (Out = Acc) to
// out[(o * chunks + chunk) * inner + i].
template <typename Op, typename In, typename Out, bool kFinal>
__global__ void reduce_kernel(const In* x, int64_t outer, int64_t n, int64_t inner,
                              int64_t chunk_rows, Out* out, bool mean, int64_t count) {
  using Acc = typename Op::Acc;
  __shared__ Acc shared[kBlock];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = blockIdx.x * int64_t(bx) + tx;
  const int64_t chunk = blockIdx.z, chunks = gridDim.z;
  const int64_t r0 = chunk * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < n ? r0 + chunk_rows : n;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    Acc acc = Op::init();
    if (i < inner) {
      const In* base = x + o * n * inner + i;
      for (int64_t r = r0 + ty; r < r1; r += by) {
        acc = Op::combine(acc, static_cast<Acc>(base[r * inner]));
      }
    }
    shared[ty * bx + tx] = acc;
    __syncthreads();
    for (int s = by / 2; s > 0; s /= 2) {
      if (ty < s) {
        shared[ty * bx + tx] = Op::combine(shared[ty * bx + tx], shared[(ty + s) * bx + tx]);
      }
      __syncthreads();
    }
    if (ty == 0 && i < inner) {
      if constexpr (kFinal) {
        out[o * inner + i] = p::finish_reduction<Out>(shared[tx], mean, count);
      } else {
        out[(o * chunks + chunk) * inner + i] = shared[tx];
      }
    }
    __syncthreads();  // shared[] is reused for the next o
  }
}

template <typename Op, typename T, typename R>
void run_reduce(Device device, const T* x, int64_t outer, int64_t n, int64_t inner, R* out,
                bool mean) {
  using Acc = typename Op::Acc;
  if (outer == 0 || inner == 0) return;
  int bx = 1;
  while (bx < 32 && bx < inner) bx *= 2;
  int by = kBlock / bx;
  int64_t xblocks = (inner + bx - 1) / bx;
  int64_t yblocks = std::min(outer, kMaxGridY);
  int64_t chunks = 1;
  if (xblocks * yblocks < kTargetBlocks && n > 4 * by) {
    chunks = std::min((kTargetBlocks + xblocks * yblocks - 1) / (xblocks * yblocks),
                      (n + 4 * by - 1) / (4 * by));
  }
  int64_t chunk_rows = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  chunks = n == 0 ? 1 : (n + chunk_rows - 1) / chunk_rows;
  cudaStream_t stream = stream_of(device);
  dim3 block(bx, by);
  if (chunks == 1) {
    reduce_kernel<Op, T, R, true>
        <<<dim3(xblocks, yblocks, 1), block, 0, stream>>>(x, outer, n, inner, n, out, mean, n);
    check(cudaGetLastError(), "reduce kernel launch");
    return;
  }
  Tensor partial =
      Tensor::empty(Shape{outer * chunks * inner * int64_t(sizeof(Acc))}, DType::kUInt8, device);
  Acc* acc = mut<Acc>(partial);
  reduce_kernel<Op, T, Acc, false><<<dim3(xblocks, yblocks, chunks), block, 0, stream>>>(
      x, outer, n, inner, chunk_rows, acc, false, 0);
  check(cudaGetLastError(), "reduce kernel launch (partial sums)");
  reduce_kernel<Op, Acc, R, true><<<dim3(xblocks, yblocks, 1), block, 0, stream>>>(
      acc, outer, chunks, inner, chunks, out, mean, n);
  check(cudaGetLastError(), "reduce kernel launch (combining partial sums)");
}

void reduce(ReduceOp op, const Tensor& x, Tensor& out) {
  DeviceGuard guard(out.device());
  reduce_3d(op, out.device(), x.dtype(), x.raw_data(), x.shape()[0], x.shape()[1], x.shape()[2],
            out.raw_data());
}

void arg_reduce(ArgReduceOp op, const Tensor& x, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_dtype(x.dtype(), "argmax", [&]<typename T>() {
    for_each(out.device(), out.numel(),
             p::ArgReduceElement<T>{ptr<T>(x), mut<int64_t>(out), x.shape()[1], x.shape()[2],
                                    op == ArgReduceOp::kArgMax},
             "argmax");
  });
}

}  // namespace

void reduce_3d(ReduceOp op, Device device, DType dtype, const void* x, int64_t outer, int64_t n,
               int64_t inner, void* out) {
  if (op == ReduceOp::kAny || op == ReduceOp::kAll) {
    if (dtype != DType::kBool) throw_unsupported_dtype("reduce_any/all", dtype, "bool");
    auto* in = static_cast<const bool*>(x);
    auto* result = static_cast<bool*>(out);
    if (op == ReduceOp::kAny)
      return run_reduce<p::AnyOp>(device, in, outer, n, inner, result, false);
    return run_reduce<p::AllOp>(device, in, outer, n, inner, result, false);
  }
  visit_dtype(dtype, "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("reduce", dtype, "a numeric dtype");
    } else {
      auto* in = static_cast<const T*>(x);
      auto* result = static_cast<T*>(out);
      switch (op) {
        case ReduceOp::kSum:
          return run_reduce<p::SumOp<T>>(device, in, outer, n, inner, result, false);
        case ReduceOp::kMean:
          return run_reduce<p::SumOp<T>>(device, in, outer, n, inner, result, true);
        case ReduceOp::kMax:
          return run_reduce<p::MaxOp<T>>(device, in, outer, n, inner, result, false);
        case ReduceOp::kMin:
          return run_reduce<p::MinOp<T>>(device, in, outer, n, inner, result, false);
        default:
          break;
      }
    }
  });
}

void register_reduction_kernels() {
  kernels::reduce.set(DeviceType::kGPU, &reduce);
  kernels::arg_reduce.set(DeviceType::kGPU, &arg_reduce);
}

}  // namespace cadre::backend::cuda
