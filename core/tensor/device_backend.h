// The seam between device-independent code and a device type's implementation: memory,
// copies to and from the host, and synchronisation. CPU is always there (cpu/); CUDA when
// Cadre is built with it (cuda/), whether or not a GPU is present. Computation on a device
// is the kernels layer's (core/kernels); devices are listed and their memory used without it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/tensor/device.h"
#include "core/tensor/allocator.h"

namespace cadre {

// The completion of an asynchronous copy (core/kernels/transfer.h makes them). Thread-safe.
class CopyEvent {
 public:
  virtual ~CopyEvent() = default;
  // Whether the copy has finished; never blocks.
  virtual bool ready() = 0;
  // Blocks until the copy has finished; throws the error it ended with.
  virtual void wait() = 0;
};

// Thread-safe.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual int device_count() const = 0;
  // Why there are no devices of this type (e.g. "no CUDA driver"), for error messages;
  // empty when device_count() > 0 or there is nothing to say.
  virtual std::string unavailable_reason() const { return ""; }
  virtual Allocator& allocator(int index) = 0;
  // Copies `bytes` between host memory and device `index` of this type, or within the
  // device. To and from the host: returns when the copy is complete. Within the device:
  // ordered before any work queued on the device later.
  virtual void copy_to_host(int index, const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_from_host(int index, const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_on_device(int index, const void* src, void* dst, size_t bytes) = 0;
  // Waits for all work queued on device `index`.
  virtual void synchronize(int index) = 0;

  // Asynchronous copies for overlapping transfers with computation (a GPU's copy stream).
  // The copy starts after the work queued on the device so far, and work queued on the
  // device afterwards runs after it, without the host waiting. Host memory must stay valid
  // (and, for copies to the device, unchanged) until the returned event is ready; it
  // should come from pinned_host_allocator() for the copy to overlap. The defaults copy
  // synchronously and return a ready event.
  virtual std::unique_ptr<CopyEvent> copy_from_host_async(int index, const void* src, void* dst,
                                                          size_t bytes);
  virtual std::unique_ptr<CopyEvent> copy_to_host_async(int index, const void* src, void* dst,
                                                        size_t bytes);
  // Host memory for those copies: page-locked for a GPU, ordinary host memory otherwise.
  virtual Allocator& pinned_host_allocator();
};

// The backend for `type`, or null when Cadre was built without it. The backends are made on
// the first call (a GPU's asks the driver how many devices there are).
DeviceBackend* device_backend(DeviceType type);

// The statistics of `device`'s allocator (every cpu:N shares the host's); peak and current
// bytes in use. Throws InvalidArgumentError listing the devices when `device` does not exist.
AllocatorStats memory_stats(Device device);
// Restarts the peak of memory_stats(device) from the bytes in use now.
void reset_peak_memory(Device device);

}  // namespace cadre
