// CPU gather, scatter-add, one-hot and index checks.
#include <cstring>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/indexing.h"

namespace cadre::backend::cpu {
namespace {

template <typename Fn>
void visit_index(const Tensor& indices, Fn&& fn) {
  if (indices.dtype() == DType::kInt64) {
    fn(typed<int64_t>(indices));
  } else {
    fn(typed<int32_t>(indices));
  }
}

void gather(const Tensor& params, const Tensor& indices, Tensor& out) {
  int64_t outer = params.shape()[0], rows = params.shape()[1], inner = params.shape()[2];
  int64_t n = indices.numel();
  size_t row_bytes = static_cast<size_t>(inner) * dtype_size(params.dtype());
  const char* src = static_cast<const char*>(params.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  visit_index(indices, [&](const auto* idx) {
    int64_t grain =
        std::max<int64_t>(1, 65536 / std::max<int64_t>(1, static_cast<int64_t>(row_bytes)));
    parallel_for(0, outer * n, grain, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        int64_t o = j / n, i = j % n;
        std::memcpy(dst + j * row_bytes,
                    src + (o * rows + static_cast<int64_t>(idx[i])) * row_bytes, row_bytes);
      }
    });
  });
}

void scatter_add(const Tensor& indices, const Tensor& updates, Tensor& target) {
  int64_t outer = target.shape()[0], rows = target.shape()[1], inner = target.shape()[2];
  int64_t n = indices.numel();
  visit_dtype(target.dtype(), "scatter_add", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("scatter_add", target.dtype(), "a numeric dtype");
    } else {
      const T* pu = typed<T>(updates);
      T* pt = typed_mut<T>(target);
      visit_index(indices, [&](const auto* idx) {
        // Rows may repeat, so each thread takes whole columns ranges of every row: no two
        // threads ever touch one element, and the order of additions stays fixed.
        int64_t grain = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, n * outer));
        parallel_for(0, inner, grain, [&](int64_t cb, int64_t ce) {
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < n; ++i) {
              T* row = pt + (o * rows + static_cast<int64_t>(idx[i])) * inner;
              const T* u = pu + (o * n + i) * inner;
              for (int64_t c = cb; c < ce; ++c) row[c] += u[c];
            }
          }
        });
      });
    }
  });
}

void one_hot(const Tensor& indices, double on_value, double off_value, Tensor& out) {
  int64_t n = indices.numel();
  int64_t depth = out.shape()[out.rank() - 1];
  visit_dtype(out.dtype(), "one_hot", [&]<typename T>() {
    T on = static_cast<T>(on_value), off = static_cast<T>(off_value);
    T* po = typed_mut<T>(out);
    visit_index(indices, [&](const auto* idx) {
      parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, depth)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i) {
                       T* row = po + i * depth;
                       std::fill(row, row + depth, off);
                       int64_t k = static_cast<int64_t>(idx[i]);
                       if (k >= 0 && k < depth) row[k] = on;
                     }
                   });
    });
  });
}

int64_t find_bad_index(const Tensor& indices, int64_t limit) {
  Tensor c = contiguous_raw(indices);
  int64_t n = c.numel();
  int64_t bad = -1;
  visit_index(c, [&](const auto* idx) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(idx[i]);
      if (v < 0 || v >= limit) {
        bad = i;
        return;
      }
    }
  });
  return bad;
}

}  // namespace

void register_index_kernels() {
  kernels::gather.set(DeviceType::kCPU, &gather);
  kernels::scatter_add.set(DeviceType::kCPU, &scatter_add);
  kernels::one_hot.set(DeviceType::kCPU, &one_hot);
  kernels::find_bad_index.set(DeviceType::kCPU, &find_bad_index);
}

}  // namespace cadre::backend::cpu
