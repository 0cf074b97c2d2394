#include "core/tensor/views.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::views {

Shape infer_shape(const std::vector<int64_t>& dims, int64_t num_elements, const char* op) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) {
        throw InvalidArgumentError(
            str_cat(op, ": only one dimension may be -1, got [", join(dims), "]"));
      }
      infer = static_cast<int>(i);
    } else if (dims[i] < 0) {
      throw InvalidArgumentError(str_cat(op, ": negative dimension in [", join(dims), "]"));
    } else {
      known *= dims[i];
    }
  }
  std::vector<int64_t> resolved = dims;
  if (infer >= 0) {
    if (known == 0 || num_elements % known != 0) {
      throw InvalidArgumentError(
          str_cat(op, ": cannot reshape ", num_elements, " elements into [", join(dims), "]"));
    }
    resolved[infer] = num_elements / known;
  } else if (known != num_elements) {
    throw InvalidArgumentError(str_cat(op, ": cannot reshape ", num_elements, " elements into [",
                                       join(dims), "] (", known, " elements)"));
  }
  return Shape(resolved);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (!x.is_contiguous()) return Tensor();
  return Tensor::view_of(x.buffer(), shape, shape.contiguous_strides(), x.offset(), x.dtype());
}

Tensor transpose(const Tensor& x, const std::vector<int>& permutation, const char* op) {
  int rank = x.rank();
  if (static_cast<int>(permutation.size()) != rank) {
    throw InvalidArgumentError(str_cat(op, ": permutation [", join(permutation),
                                       "] does not fit a tensor of shape ", x.shape()));
  }
  std::vector<bool> seen(rank, false);
  Shape shape;
  Strides strides{};
  for (int i = 0; i < rank; ++i) {
    int p = permutation[i];
    if (p < 0 || p >= rank || seen[p]) {
      throw InvalidArgumentError(str_cat(
          op, ": [", join(permutation), "] is not a permutation of the axes of shape ", x.shape()));
    }
    seen[p] = true;
    shape.push_back(x.shape()[p]);
    strides[i] = x.strides()[p];
  }
  return Tensor::view_of(x.buffer(), shape, strides, x.offset(), x.dtype());
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step, const char* op) {
  int a = x.shape().normalize_axis(axis);
  int64_t size = x.shape()[a];
  if (step <= 0) throw InvalidArgumentError(str_cat(op, ": step must be positive, got ", step));
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  int64_t count = (end - start + step - 1) / step;
  Shape shape = x.shape().with_dim(a, count);
  Strides strides = x.strides();
  strides[a] *= step;
  int64_t offset = x.offset() + (count > 0 ? start * x.strides()[a] : 0);
  return Tensor::view_of(x.buffer(), shape, strides, offset, x.dtype());
}

Tensor broadcast(const Tensor& x, const Shape& shape, const char* op) {
  if (x.shape() == shape) return x;
  int rank = shape.rank();
  if (x.rank() > rank) {
    throw InvalidArgumentError(str_cat(op, ": cannot broadcast shape ", x.shape(), " to ", shape));
  }
  Strides strides{};
  for (int i = 0; i < rank; ++i) {
    int xi = x.rank() - rank + i;
    if (xi < 0) continue;  // new leading axis: stride 0
    int64_t d = x.shape()[xi];
    if (d == shape[i]) {
      strides[i] = d == 1 ? 0 : x.strides()[xi];
    } else if (d == 1) {
      strides[i] = 0;
    } else {
      throw InvalidArgumentError(
          str_cat(op, ": cannot broadcast shape ", x.shape(), " to ", shape));
    }
  }
  return Tensor::view_of(x.buffer(), shape, strides, x.offset(), x.dtype());
}

bool is_row_strided_matrix(const Tensor& x) {
  return x.rank() == 2 && x.strides()[1] == 1 && x.strides()[0] >= x.shape()[1];
}

bool is_transposed_matrix(const Tensor& x) {
  return x.rank() == 2 && x.strides()[0] == 1 && x.strides()[1] == x.shape()[0] &&
         x.shape()[0] > 1 && x.shape()[1] > 1;
}

}  // namespace cadre::views
