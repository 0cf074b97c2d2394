#include "strategies/ps/entry.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {

std::string describe(DType dtype, const Shape& shape) {
  return str_cat(dtype_name(dtype), " ", shape);
}

Tensor fill(Filling& filling, DType dtype, const Shape& shape, const Tensor& chunk,
            int64_t first_row, const std::string& what) {
  bool fits = shape.rank() > 0 && chunk.dtype() == dtype && chunk.rank() == shape.rank() &&
              first_row >= 0 && first_row + chunk.dim(0) <= shape[0];
  for (int d = 1; fits && d < shape.rank(); ++d) fits = chunk.dim(d) == shape[d];
  if (!fits) {
    throw InvalidArgumentError(str_cat(what, ": a chunk of ",
                                       describe(chunk.dtype(), chunk.shape()), " from row ",
                                       first_row, " does not fit ", describe(dtype, shape)));
  }
  if (first_row == 0) {
    filling.value = Tensor::empty(shape, dtype, Device::cpu(0));
    filling.rows = 0;
  } else if (first_row != filling.rows) {
    throw InvalidArgumentError(str_cat(what, ": a chunk from row ", first_row, " after ",
                                       filling.rows, " rows (chunks come in row order)"));
  }
  write_rows(filling.value, chunk, first_row);
  filling.rows += chunk.dim(0);
  if (filling.rows < shape[0]) return Tensor();
  Tensor whole = std::move(filling.value);
  filling = Filling();
  return whole;
}

Tensor row_ids(const Tensor& ids, const Entry& entry, const std::string& what) {
  if (ids.dtype() != DType::kInt64 || ids.rank() != 1) {
    throw InvalidArgumentError(
        str_cat(what, ": row ids must be int64 [n], got ", describe(ids.dtype(), ids.shape())));
  }
  int64_t rows = entry.shape.rank() == 0 ? 1 : entry.shape[0];
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (p[i] < 0 || p[i] >= rows) {
      throw InvalidArgumentError(str_cat(what, ": row ", p[i], " is outside [0, ", rows, ")"));
    }
  }
  return ids;
}

Gradient gradient_of(const PushItem& item, const Entry& entry, const std::string& task) {
  std::string what = str_cat(task, ": the gradient for '", item.name(), "'");
  if (!item.sparse()) {
    Tensor dense = from_proto(item.dense(), what);
    if (dense.shape() != entry.shape || dense.dtype() != entry.dtype) {
      throw InvalidArgumentError(str_cat(what, " is ", describe(dense.dtype(), dense.shape()),
                                         "; the variable is ", describe(entry.dtype, entry.shape)));
    }
    return dense;
  }
  Tensor ids = row_ids(from_proto(item.indices(), what), entry, what);
  Tensor values = from_proto(item.values(), what);
  Shape expected =
      entry.shape.rank() == 0 ? Shape{ids.numel()} : entry.shape.with_dim(0, ids.numel());
  if (values.shape() != expected || values.dtype() != entry.dtype) {
    throw InvalidArgumentError(str_cat(what, " has rows ", describe(values.dtype(), values.shape()),
                                       " for ", ids.numel(), " ids; the variable is ",
                                       describe(entry.dtype, entry.shape)));
  }
  return IndexedSlices{ids, values, entry.shape};
}

}  // namespace cadre::ps
