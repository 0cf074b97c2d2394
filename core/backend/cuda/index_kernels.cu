// CUDA gather, scatter-add, one-hot and index checks.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/cuda/dispatch.h"
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/index_ops.h"
#include "core/backend/portable/offsets.h"
#include "core/kernels/indexing.h"

namespace cadre::backend::cuda {
namespace {

// *address += value for the element types scatter_add supports. uint8 has no atomic of its
// own: its aligned 32-bit word is updated by compare-and-swap.
template <typename T>
__device__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address),
              static_cast<unsigned long long>(value));  // two's complement wraps alike
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    auto word_address = reinterpret_cast<uintptr_t>(address);
    auto* word = reinterpret_cast<unsigned int*>(word_address & ~uintptr_t{3});
    unsigned shift = static_cast<unsigned>(word_address & 3) * 8;
    unsigned old = *word, assumed;
    do {
      assumed = old;
      unsigned byte = ((assumed >> shift) + value) & 0xffu;
      old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (byte << shift));
    } while (old != assumed);
  } else {
    atomicAdd(address, value);
  }
}

// target[o, indices[i], c] += updates[o, i, c] for one element of updates.
template <typename T, typename I>
struct ScatterAddElement {
  const I* indices;
  const T* updates;
  T* target;
  int64_t rows, n, inner;
  __device__ void operator()(int64_t j) const {
    int64_t c = j % inner, k = j / inner;
    int64_t i = k % n, o = k / n;
    atomic_add(target + (o * rows + static_cast<int64_t>(indices[i])) * inner + c, updates[j]);
  }
};

// *first = min(*first, position) over the indices outside [0, limit).
template <typename I>
struct FindBadElement {
  const I* indices;
  portable::Offsets<1> at;
  int64_t limit;
  unsigned long long* first;
  __device__ void operator()(int64_t i) const {
    int64_t v = static_cast<int64_t>(indices[at.get0(i)]);
    if (v < 0 || v >= limit) atomicMin(first, static_cast<unsigned long long>(i));
  }
};

void gather(const Tensor& params, const Tensor& indices, Tensor& out) {
  DeviceGuard guard(out.device());
  int64_t rows = params.shape()[1], inner = params.shape()[2], n = indices.numel();
  visit_storage_word(params.dtype(), [&]<typename W>() {
    visit_index(indices, [&](const auto* idx) {
      using I = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
      for_each(out.device(), out.numel(),
               portable::GatherElement<W, I>{ptr<W>(params), idx, mut<W>(out), rows, n, inner},
               "gather");
    });
  });
}

void scatter_add(const Tensor& indices, const Tensor& updates, Tensor& target) {
  DeviceGuard guard(target.device());
  int64_t rows = target.shape()[1], inner = target.shape()[2], n = indices.numel();
  visit_dtype(target.dtype(), "scatter_add", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("scatter_add", target.dtype(), "a numeric dtype");
    } else {
      visit_index(indices, [&](const auto* idx) {
        using I = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
        for_each(target.device(), updates.numel(),
                 ScatterAddElement<T, I>{idx, ptr<T>(updates), mut<T>(target), rows, n, inner},
                 "scatter_add");
      });
    }
  });
}

void one_hot(const Tensor& indices, double on_value, double off_value, Tensor& out) {
  DeviceGuard guard(out.device());
  int64_t depth = out.shape()[out.rank() - 1];
  visit_dtype(out.dtype(), "one_hot", [&]<typename T>() {
    visit_index(indices, [&](const auto* idx) {
      using I = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
      for_each(out.device(), out.numel(),
               portable::OneHotElement<T, I>{idx, mut<T>(out), depth, static_cast<T>(on_value),
                                             static_cast<T>(off_value)},
               "one_hot");
    });
  });
}

// Waits for the device: the caller needs the answer on the host.
int64_t find_bad_index(const Tensor& indices, int64_t limit) {
  DeviceGuard guard(indices.device());
  if (indices.numel() == 0) return -1;
  Device device = indices.device();
  Tensor first = Tensor::empty(Shape{1}, DType::kInt64, device);
  cudaStream_t stream = stream_of(device);
  check(cudaMemsetAsync(first.raw_data(), 0xff, sizeof(int64_t), stream), "cudaMemsetAsync");
  auto* slot = static_cast<unsigned long long*>(first.raw_data());
  visit_index(indices, [&](const auto* idx) {
    using I = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
    for_each(device, indices.numel(),
             FindBadElement<I>{idx, portable::make_offsets<1>({&indices}), limit, slot},
             "index check");
  });
  unsigned long long result = 0;
  check(cudaMemcpyAsync(&result, slot, sizeof result, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (index check)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (index check)");
  return result == ~0ull ? -1 : static_cast<int64_t>(result);
}

}  // namespace

void register_index_kernels() {
  kernels::gather.set(DeviceType::kGPU, &gather);
  kernels::scatter_add.set(DeviceType::kGPU, &scatter_add);
  kernels::one_hot.set(DeviceType::kGPU, &one_hot);
  kernels::find_bad_index.set(DeviceType::kGPU, &find_bad_index);
}

}  // namespace cadre::backend::cuda
