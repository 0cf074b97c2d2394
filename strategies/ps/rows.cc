#include "strategies/ps/rows.h"

#include <cstring>

#include "cadre/autodiff/tape.h"

namespace cadre::ps {

Tensor host(const Tensor& t) { return t.to(Device::cpu(0)).contiguous(); }

Tensor rows_of(const Tensor& t, const Slice& slice) {
  return t.rank() == 0 ? t : t.slice(0, slice.first_row, slice.first_row + slice.rows);
}

size_t row_bytes(const Tensor& t) {
  if (t.rank() == 0) return t.nbytes();
  return t.dim(0) == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dim(0));
}

void write_rows(Tensor& local, const Tensor& rows, int64_t first) {
  Tensor src = rows.contiguous();
  std::memcpy(static_cast<char*>(local.raw_data()) + static_cast<size_t>(first) * row_bytes(local),
              src.raw_data(), src.nbytes());
}

std::vector<int64_t> ids_of(const Tensor& ids) {
  NoGradScope no_grad;
  return host(ids.cast(DType::kInt64)).to_vector<int64_t>();
}

}  // namespace cadre::ps
