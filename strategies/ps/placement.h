// Where a parameter-server cluster keeps each variable, as PlacementOptions (public) say.
// Every worker computes the same plan, since every worker creates the same variables in
// the same order (the same model_fn).
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
  // Throws InvalidArgumentError for no ps tasks or negative options.
  Placement(int num_ps, PlacementOptions options = {});
  // The slices of the next variable; whole variables (and scalars) are one slice.
  std::vector<Slice> place(const std::string& name, const Shape& shape, DType dtype);
  // The plan so far, a line per ps task: its variables and bytes.
  std::string describe() const;

 private:
  int pick(const std::vector<bool>& taken);

  int num_ps_;
  PlacementOptions options_;
  std::vector<int64_t> bytes_;
  std::vector<std::vector<std::string>> names_;
  int next_ = 0;  // round robin
};

}  // namespace cadre::ps
