#include "core/tensor/device_backend.h"

#include <array>

#include "core/tensor/caching_allocator.h"
#include "core/tensor/cpu/device_backend.h"
#if CADRE_WITH_CUDA
#include "core/tensor/cuda/device_backend.h"
#endif

namespace cadre {
namespace {

using Backends = std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>;

// Never destroyed: tensors in static storage return their memory to these allocators.
Backends& backends() {
  static Backends* table = [] {
    auto* t = new Backends();
    (*t)[static_cast<int>(DeviceType::kCPU)] = backend::cpu::make_device_backend();
#if CADRE_WITH_CUDA
    (*t)[static_cast<int>(DeviceType::kGPU)] = backend::cuda::make_device_backend();
#endif
    return t;
  }();
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

DeviceBackend* device_backend(DeviceType type) { return backends()[static_cast<int>(type)].get(); }

AllocatorStats memory_stats(Device device) {
  check_device(device);
  return device_backend(device.type)->allocator(device.index).stats();
}

void reset_peak_memory(Device device) {
  check_device(device);
  device_backend(device.type)->allocator(device.index).reset_peak();
}

}  // namespace cadre
