// Row slices of host tensors: the pieces of a variable that its ps tasks hold (Slice), cut
// out for sending and written back into place on receipt.
#pragma once

#include <cstdint>
#include <vector>

#include "cadre/tensor/tensor.h"
#include "strategies/ps/placement.h"

namespace cadre::ps {

// `t` on the host, contiguous.
Tensor host(const Tensor& t);
// The rows of `t` that `slice` holds (a scalar is its own slice).
Tensor rows_of(const Tensor& t, const Slice& slice);
// Writes `rows` over rows [first, first + rows.dim(0)) of `local` (both on the host,
// `local` contiguous).
void write_rows(Tensor& local, const Tensor& rows, int64_t first);
// Bytes of one row of `t` (of a scalar: all of it).
size_t row_bytes(const Tensor& t);
// Row ids (any integer dtype, any device) as int64s on the host.
std::vector<int64_t> ids_of(const Tensor& ids);

}  // namespace cadre::ps
