// The seam between device-independent code and a device type's implementation: memory,
// copies to and from the host, and synchronisation. CPU is always registered; CUDA is
// registered when Cadre is built with it (whether or not a GPU is present).
#pragma once

#include <cstddef>
#include <memory>

#include "core/tensor/allocator.h"
#include "core/tensor/device.h"

namespace cadre {

// Thread-safe.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual int device_count() const = 0;
  virtual Allocator& allocator(int index) = 0;
  // Copies `bytes` between host memory and device `index` of this type, or within the
  // device; returns when the copy is complete.
  virtual void copy_to_host(int index, const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_from_host(int index, const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_on_device(int index, const void* src, void* dst, size_t bytes) = 0;
  // Waits for all work queued on device `index`.
  virtual void synchronize(int index) = 0;
};

// The backend for `type`, or null when Cadre was built without it.
DeviceBackend* device_backend(DeviceType type);
// Called once by each backend's registration function.
void register_device_backend(DeviceType type, std::unique_ptr<DeviceBackend> backend);

}  // namespace cadre
