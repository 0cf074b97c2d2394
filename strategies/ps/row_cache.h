// The local copy of a row-access variable on the ps tasks (an embedding table): rows are
// fetched when a step first looks them up, and go stale when the next step begins, so that
// a step moves only the rows it uses.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/nn/variable.h"
#include "strategies/ps/placement.h"
#include "strategies/ps/ps_client.h"

namespace cadre::ps {

// Thread-safe: the replicas of a step look rows up concurrently.
class RowCache : public nn::RemoteSource {
 public:
  // `clients` (one per ps task, in index order) outlive the cache; `slices` are where the
  // variable's `rows` rows live.
  RowCache(const std::vector<std::unique_ptr<PsClient>>& clients, std::vector<Slice> slices,
           int64_t rows);

  // Every row, unless all are fresh already.
  void fetch(Tensor local) override;
  // The rows `ids` names that are not fresh (ids out of range are left to the lookup to
  // report).
  void fetch_rows(Tensor local, const Tensor& ids) override;
  // Marks every row stale: the next step fetches again.
  void invalidate();

 private:
  size_t slice_of(int64_t row) const;

  const std::vector<std::unique_ptr<PsClient>>& clients_;
  std::vector<Slice> slices_;
  Mutex mutex_;
  std::vector<uint8_t> fresh_ CADRE_GUARDED_BY(mutex_);    // per row
  std::vector<int64_t> touched_ CADRE_GUARDED_BY(mutex_);  // rows marked fresh
  bool all_fresh_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace cadre::ps
