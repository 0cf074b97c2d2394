// Gradients of a variable on the ps tasks, cut into the items (ps.proto's PushItem) of its
// slices: one push request per ps task.
#pragma once

#include <vector>

#include "cadre/autodiff/gradient.h"
#include "strategies/ps/placement.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

// The rows of a dense `gradient` each slice holds, an item for each, added to
// requests[slice.ps].
void add_dense(const Tensor& gradient, const std::vector<Slice>& slices,
               std::vector<PushRequest>& requests);
// The rows of a sparse `gradient` (duplicates summed) that each slice holds, as row ids
// within the slice and their values; nothing for a slice none of them falls in.
void add_sparse(const IndexedSlices& gradient, const std::vector<Slice>& slices,
                std::vector<PushRequest>& requests);

}  // namespace cadre::ps
