// Where a parameter-server cluster keeps each variable, as PlacementOptions (public) say,
// in slices small enough for a message (message_budget.h). Every worker computes the same
// plan, since every worker creates the same variables in the same order (the same
// model_fn).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/parameter_server_options.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"

namespace cadre::ps {

// Rows [first_row, first_row + rows) of a variable, on ps task `ps` under `name` (the
// variable's own name when whole, "<name>/part_<k>" for slice k).
struct Slice {
  int ps = 0;
  std::string name;
  int64_t first_row = 0;
  int64_t rows = 0;
};

// Not thread-safe.
class Placement {
 public:
  // `max_slice_bytes` > 0: no slice is larger, whatever `options` say (a row larger than
  // that is a slice alone), however many slices per ps task that takes. Throws
  // InvalidArgumentError for no ps tasks or negative options.
  Placement(int num_ps, PlacementOptions options = {}, int64_t max_slice_bytes = 0);
  // The slices of the next variable, in row order; whole variables (and scalars) are one
  // slice. A variable's slices go to different ps tasks while there are ps tasks it has
  // none on.
  std::vector<Slice> place(const std::string& name, const Shape& shape, DType dtype);
  // The plan so far, a line per ps task: its variables and bytes.
  std::string describe() const;

 private:
  int pick(const std::vector<bool>& taken);
  int64_t count_slices(const Shape& shape, int64_t row_bytes) const;

  int num_ps_;
  PlacementOptions options_;
  int64_t max_slice_bytes_;
  std::vector<int64_t> bytes_;
  std::vector<std::vector<std::string>> names_;
  int next_ = 0;  // round robin
};

}  // namespace cadre::ps
