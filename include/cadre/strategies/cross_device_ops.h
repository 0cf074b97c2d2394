// How a strategy combines the replicas' values (gradients, mostly) across local devices, as
// TensorFlow's CrossDeviceOps: ReductionToOneDevice, HierarchicalCopyAllReduce and
// NcclAllReduce.
//
// Small dense tensors are packed into buckets of about bucket_bytes and each bucket is
// reduced as one (TensorFlow's gradient packing, PyTorch DDP's 25 MB buckets): one pass
// over memory and one synchronisation per bucket instead of per tensor.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/strategies/per_replica.h"
#include "cadre/tensor/device.h"

namespace cadre {

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  virtual std::string name() const = 0;
  // values[r] is replica r's list (the same shapes and dtypes, in the same order, on every
  // replica; undefined entries stay undefined). kSum adds the replicas' values weighted by
  // weights[r]; kMean divides that by the sum of the weights (the replicas' batch sizes,
  // so that unevenly split batches average exactly). Returns the result once per replica,
  // on destinations[r]. Sparse values are concatenated (rows scaled by their weight).
  virtual PerReplica<std::vector<Gradient>> batch_reduce(
      ReduceOp op, const PerReplica<std::vector<Gradient>>& values,
      const std::vector<double>& weights, const std::vector<Device>& destinations) = 0;
};

inline constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

// Sums every replica's values on `reduce_to`, in replica order, then copies the result to
// each destination. bucket_bytes 0: no packing.
std::shared_ptr<CrossDeviceOps> reduction_to_one_device(Device reduce_to = Device::cpu(0),
                                                        size_t bucket_bytes = kDefaultBucketBytes);
// Adds replicas in pairs, then pairs of pairs (a tree of depth log2 N), each sum on the
// device of its first operand, and copies the total back down the tree.
std::shared_ptr<CrossDeviceOps> hierarchical_copy_all_reduce(
    size_t bucket_bytes = kDefaultBucketBytes);
// NCCL across the local GPUs (one communicator per GPU from ncclCommInitAll, one group call
// per bucket, results left on each replica's GPU). Throws UnimplementedError when Cadre was
// built without CUDA; batch_reduce throws InvalidArgumentError when a value is not on a GPU
// or two replicas share one.
std::shared_ptr<CrossDeviceOps> nccl_all_reduce(size_t bucket_bytes = kDefaultBucketBytes);

}  // namespace cadre
