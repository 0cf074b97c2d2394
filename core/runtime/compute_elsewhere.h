// The thread budget's exception for a thread whose computation is on GPUs
// (cadre/runtime/threading.h).
#pragma once

namespace cadre {

// For its lifetime, the calling thread's computation runs elsewhere (its replicas' kernels
// on GPUs), so that the compute threads the budget counts are idle: spare_core() is then
// true wherever this host has more than one core. DistributedDataset makes its iterators
// under it when every replica is on a GPU, so that an autotuned prefetch reads ahead on a
// thread of its own instead of on the thread that launches the kernels.
class ComputeElsewhereScope {
 public:
  ComputeElsewhereScope();
  ~ComputeElsewhereScope();
  ComputeElsewhereScope(const ComputeElsewhereScope&) = delete;
  ComputeElsewhereScope& operator=(const ComputeElsewhereScope&) = delete;

 private:
  bool previous_;
};

}  // namespace cadre
