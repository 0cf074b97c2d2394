// A variable (or a row slice of one) as a ps task holds it, and the checks of what
// requests say about it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/nn/variable.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"
#include "cadre/tensor/tensor.h"
#include "strategies/ps/ps.pb.h"
#include "strategies/ps/saved_tensor.h"

namespace cadre::ps {

// A value that comes in chunks of rows, in order (ps.proto's value_partial).
struct Filling {
  Tensor value;
  int64_t rows = 0;  // filled so far
};

// Writes `chunk`, rows [first_row, first_row + chunk.dim(0)) of a value of `dtype` and
// `shape`, into `filling` (a chunk from row 0 starts it again) and returns the whole value
// once its last row has come (emptying `filling`), else an undefined tensor.
// InvalidArgumentError naming `what` for a chunk that does not fit or comes out of order.
Tensor fill(Filling& filling, DType dtype, const Shape& shape, const Tensor& chunk,
            int64_t first_row, const std::string& what);

struct Entry {
  VariableDef def;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::shared_ptr<nn::Variable> variable;  // set once the chief has initialised it
  Filling filling;  // the chief's value while its chunks come; guarded by the shard's mutex
  // Serialises updates and reads of the variable and its slots.
  std::mutex mutex;
  // Optimizers whose state (slots) the chief has sent for this variable. Guarded by the
  // shard's mutex.
  std::set<std::string> optimizer_state;
  // While a checkpoint part is written: the copy-on-write snapshots of the variable and its
  // slots that the part streams (those too small to be worth it were copied at the mark).
  // Every write of the variable or a slot calls keep_rows() or keep_all() on each first.
  // Guarded by `mutex`.
  std::vector<std::unique_ptr<SavedTensor>> saving;
};

// "float32 [3, 2]", as messages name a variable's type.
std::string describe(DType dtype, const Shape& shape);

// `ids` as int64 row ids within the entry's rows; InvalidArgumentError naming `what` and a
// bad id, or ids that are not int64 [n].
Tensor row_ids(const Tensor& ids, const Entry& entry, const std::string& what);

// The gradient of `entry` that `item` carries (dense, or sparse rows), checked against the
// variable: InvalidArgumentError naming the variable, `task` and both types when they do
// not match.
Gradient gradient_of(const PushItem& item, const Entry& entry, const std::string& task);

}  // namespace cadre::ps
