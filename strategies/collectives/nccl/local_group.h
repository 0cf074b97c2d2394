// NCCL over several GPUs of this process (ncclCommInitAll), one group call per all-reduce:
// MirroredStrategy's NcclAllReduce. Built with CUDA only (nccl/unavailable.cc otherwise).
#pragma once

#include <memory>
#include <vector>

#include "cadre/tensor/device.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

// Thread-compatible.
class LocalNcclGroup {
 public:
  virtual ~LocalNcclGroup() = default;
  virtual const std::vector<Device>& devices() const = 0;
  // In place: buffers[r] (contiguous, on devices()[r], one shape and dtype for all) become
  // their element-wise sum, in one NCCL group call. Ordered on each device's compute
  // stream; returns without waiting for the devices.
  virtual void all_reduce_sum(const std::vector<Tensor>& buffers) = 0;
};

// Communicators over distinct GPUs of this process. Throws InvalidArgumentError naming a
// device that is not a GPU or appears twice, UnimplementedError without CUDA.
std::unique_ptr<LocalNcclGroup> local_nccl_group(const std::vector<Device>& devices);

}  // namespace cadre
