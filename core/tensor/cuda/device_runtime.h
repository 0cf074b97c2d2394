// Per-GPU execution state: a compute stream on which every kernel, library call and
// device-side copy of the device runs in order, a copy stream for transfers that overlap
// with computation (core/kernels/transfer.h), and a pool of events that order the two.
//
// One compute stream per device keeps the caching allocator simple and safe: memory freed
// by a tensor is reused only by work queued later on the same stream, which runs after
// every earlier use. Work on the copy stream is ordered against it with events.
//
// Part of the tensor layer (the GPU's memory and copies need it), used by the CUDA kernels
// (core/backend/cuda) and the NCCL collectives above it.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cadre/base/mutex.h"

namespace cadre::backend::cuda {

// Thread-safe. Lives as long as the process.
class DeviceRuntime {
 public:
  explicit DeviceRuntime(int device);
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  int device() const { return device_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t copy() const { return copy_; }

  // An event (timing disabled) from the pool; give it back with release_event.
  cudaEvent_t acquire_event();
  void release_event(cudaEvent_t event);
  // Makes `waiter` wait, on the device, for the work queued on `signaller` so far. The host
  // does not wait.
  void order_after(cudaStream_t waiter, cudaStream_t signaller);
  // Records an event (from the pool) on `stream`; the caller releases it.
  cudaEvent_t record(cudaStream_t stream);

 private:
  int device_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  Mutex mutex_;
  std::vector<cudaEvent_t> free_events_ CADRE_GUARDED_BY(mutex_);
};

// GPUs visible to this process (0 without a driver or a device).
int visible_device_count();
// The runtime of GPU `device` (0 <= device < visible_device_count()), created on first use.
DeviceRuntime& runtime(int device);

}  // namespace cadre::backend::cuda
