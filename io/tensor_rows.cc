#include "io/tensor_rows.h"

#include <algorithm>
#include <cstring>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

void check_dtype(const Tensor& first, const Tensor& row, std::string_view what) {
  if (row.dtype() != first.dtype()) {
    throw InvalidArgumentError(str_cat("cannot batch '", what, "': dtypes ", first.dtype(), " and ",
                                       row.dtype(), " differ"));
  }
}

bool all_on_cpu(const std::vector<const Tensor*>& rows) {
  for (const Tensor* r : rows) {
    if (!r->device().is_cpu()) return false;
  }
  return true;
}

// Copies the rows at `sources`, `row_bytes` each, into `dst` one after another. After a
// shuffle the rows come from all over their source, and each row's first lines miss the
// caches: the lines of the row four ahead are asked for while one is copied, so that their
// latencies overlap (the first 2 KiB of a row; the hardware streams the rest; 2 and 8 ahead
// were slower, docs/BENCHMARKS.md#input-pipeline).
void copy_rows(std::span<const char* const> sources, size_t row_bytes, char* dst) {
  if (row_bytes == 0) return;
  constexpr size_t kAhead = 4;
  const size_t ahead_bytes = std::min<size_t>(row_bytes, 2048);
  auto prefetch = [&](size_t i) {
    if (i >= sources.size()) return;
    for (size_t b = 0; b < ahead_bytes; b += 64) __builtin_prefetch(sources[i] + b);
  };
  for (size_t i = 0; i < kAhead; ++i) prefetch(i);
  for (size_t i = 0; i < sources.size(); ++i, dst += row_bytes) {
    prefetch(i + kAhead);
    std::memcpy(dst, sources[i], row_bytes);
  }
}

}  // namespace

Tensor row_view(const Tensor& x, int64_t i) {
  Shape shape = x.shape().without_dim(0);
  Strides strides{};
  for (int d = 1; d < x.rank(); ++d) strides[d - 1] = x.strides()[d];
  return Tensor::view_of(x.buffer(), shape, strides, x.offset() + i * x.strides()[0], x.dtype());
}

Tensor stack_rows(const std::vector<const Tensor*>& rows, std::string_view what) {
  if (rows.empty()) throw InvalidArgumentError(str_cat("cannot batch '", what, "': no rows"));
  const Tensor& first = *rows.front();
  auto check = [&](const Tensor& r) {
    check_dtype(first, r, what);
    if (r.shape() != first.shape()) {
      throw InvalidArgumentError(str_cat("cannot batch '", what, "': shapes ", first.shape(),
                                         " and ", r.shape(),
                                         " differ (padded_batch pads varying shapes)"));
    }
  };
  if (!all_on_cpu(rows)) {
    std::vector<Tensor> copies;
    for (const Tensor* r : rows) {
      check(*r);
      copies.push_back(*r);
    }
    return stack(copies, 0);
  }
  Shape shape{static_cast<int64_t>(rows.size())};
  for (int64_t d : first.shape()) shape.push_back(d);
  Tensor out = Tensor::empty(shape, first.dtype(), Device::cpu(0));
  std::vector<const char*> sources(rows.size());
  std::vector<Tensor> packed;  // contiguous copies of rows that are not contiguous
  for (size_t i = 0; i < rows.size(); ++i) {
    check(*rows[i]);
    const Tensor* row = rows[i];
    if (!row->is_contiguous()) row = &packed.emplace_back(row->contiguous());
    sources[i] = static_cast<const char*>(row->raw_data());
  }
  copy_rows(sources, first.nbytes(), static_cast<char*>(out.raw_data()));
  return out;
}

Tensor gather_rows(const Tensor& source, std::span<const int64_t> rows, std::string_view what) {
  const int64_t n = source.dim(0);
  for (int64_t r : rows) {
    if (r < 0 || r >= n) {
      throw DataLossError(str_cat(what, ": no row ", r, "; there are ", n));
    }
  }
  Shape shape{static_cast<int64_t>(rows.size())};
  for (int d = 1; d < source.rank(); ++d) shape.push_back(source.dim(d));
  if (!source.is_contiguous() && !rows.empty()) {
    std::vector<Tensor> views;
    views.reserve(rows.size());
    for (int64_t r : rows) views.push_back(row_view(source, r));
    std::vector<const Tensor*> pointers;
    for (const Tensor& v : views) pointers.push_back(&v);
    return stack_rows(pointers, what);
  }
  Tensor out = Tensor::empty(shape, source.dtype(), Device::cpu(0));
  const size_t row_bytes = source.nbytes() / static_cast<size_t>(std::max<int64_t>(n, 1));
  const auto* base = static_cast<const char*>(source.raw_data());
  std::vector<const char*> sources(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    sources[i] = base + static_cast<size_t>(rows[i]) * row_bytes;
  copy_rows(sources, row_bytes, static_cast<char*>(out.raw_data()));
  return out;
}

std::vector<int64_t> batch_origin(std::span<const int64_t> rows) {
  std::vector<int64_t> origin;
  origin.reserve(2 * rows.size());
  for (int64_t r : rows) {
    origin.push_back(1);
    origin.push_back(r);
  }
  return origin;
}

Tensor pad_and_stack_rows(const std::vector<const Tensor*>& rows, double padding_value,
                          std::string_view what) {
  if (rows.empty()) throw InvalidArgumentError(str_cat("cannot batch '", what, "': no rows"));
  const Tensor& first = *rows.front();
  int rank = first.rank();
  std::vector<int64_t> padded(first.shape().begin(), first.shape().end());
  for (const Tensor* r : rows) {
    check_dtype(first, *r, what);
    if (r->rank() != rank) {
      throw InvalidArgumentError(str_cat("cannot pad and batch '", what, "': ranks of ",
                                         first.shape(), " and ", r->shape(), " differ"));
    }
    for (int d = 0; d < rank; ++d) padded[d] = std::max(padded[d], r->shape()[d]);
  }
  Shape row_shape(padded);
  Shape shape{static_cast<int64_t>(rows.size())};
  for (int64_t d : padded) shape.push_back(d);
  Tensor out = Tensor::full(shape, padding_value, first.dtype(), Device::cpu(0));
  size_t element = dtype_size(first.dtype());
  auto out_strides = row_shape.contiguous_strides();
  auto* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    Tensor r = rows[i]->to(Device::cpu(0)).contiguous();
    if (r.numel() == 0) continue;
    char* base = dst + i * static_cast<size_t>(row_shape.num_elements()) * element;
    const auto* src = static_cast<const char*>(r.raw_data());
    if (rank == 0) {
      std::memcpy(base, src, element);
      continue;
    }
    // Copy runs of the innermost dimension; `index` walks the outer dimensions.
    int64_t inner = r.shape()[rank - 1];
    int64_t runs = r.numel() / inner;
    std::vector<int64_t> index(rank, 0);
    for (int64_t run = 0; run < runs; ++run) {
      int64_t offset = 0;
      for (int d = 0; d < rank - 1; ++d) offset += index[d] * out_strides[d];
      std::memcpy(base + offset * element, src + run * inner * element, inner * element);
      for (int d = rank - 2; d >= 0; --d) {
        if (++index[d] < r.shape()[d]) break;
        index[d] = 0;
      }
    }
  }
  return out;
}

}  // namespace cadre::io
