#include "core/tensor/device_backend.h"

#include <array>

#include "core/kernels/registry.h"
#include "core/tensor/caching_allocator.h"

namespace cadre {
namespace {

std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>& backends() {
  static auto* table = new std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>();
  return *table;
}

class ReadyEvent : public CopyEvent {
 public:
  bool ready() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<CopyEvent> DeviceBackend::copy_from_host_async(int index, const void* src,
                                                               void* dst, size_t bytes) {
  copy_from_host(index, src, dst, bytes);
  return std::make_unique<ReadyEvent>();
}

std::unique_ptr<CopyEvent> DeviceBackend::copy_to_host_async(int index, const void* src, void* dst,
                                                             size_t bytes) {
  copy_to_host(index, src, dst, bytes);
  return std::make_unique<ReadyEvent>();
}

Allocator& DeviceBackend::pinned_host_allocator() { return cpu_allocator(); }

DeviceBackend* device_backend(DeviceType type) {
  kernels::ensure_backends_registered();
  return backends()[static_cast<int>(type)].get();
}

void register_device_backend(DeviceType type, std::unique_ptr<DeviceBackend> backend) {
  backends()[static_cast<int>(type)] = std::move(backend);
}

AllocatorStats memory_stats(Device device) {
  check_device(device);
  return device_backend(device.type)->allocator(device.index).stats();
}

void reset_peak_memory(Device device) {
  check_device(device);
  device_backend(device.type)->allocator(device.index).reset_peak();
}

}  // namespace cadre
