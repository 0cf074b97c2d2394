#include "strategies/ps/gradient_items.h"

#include "cadre/nn/optimizer.h"
#include "cadre/ops/indexing.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {

void add_dense(const Tensor& gradient, const std::vector<Slice>& slices,
               std::vector<PushRequest>& requests) {
  Tensor dense = host(gradient);
  for (const Slice& s : slices) {
    PushItem* item = requests[static_cast<size_t>(s.ps)].add_items();
    item->set_name(s.name);
    to_proto(rows_of(dense, s), item->mutable_dense());
  }
}

void add_sparse(const IndexedSlices& gradient, const std::vector<Slice>& slices,
                std::vector<PushRequest>& requests) {
  IndexedSlices sparse = nn::deduplicate(gradient);
  std::vector<int64_t> ids = ids_of(sparse.indices);
  Tensor values = host(sparse.values);
  for (const Slice& s : slices) {
    std::vector<int64_t> positions, local;
    for (size_t j = 0; j < ids.size(); ++j) {
      if (ids[j] >= s.first_row && ids[j] < s.first_row + s.rows) {
        positions.push_back(static_cast<int64_t>(j));
        local.push_back(ids[j] - s.first_row);
      }
    }
    if (positions.empty()) continue;
    PushItem* item = requests[static_cast<size_t>(s.ps)].add_items();
    item->set_name(s.name);
    item->set_sparse(true);
    to_proto(Tensor::from_vector(local), item->mutable_indices());
    to_proto(cadre::gather(values, Tensor::from_vector(positions), 0), item->mutable_values());
  }
}

}  // namespace cadre::ps
