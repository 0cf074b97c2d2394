#include "core/tensor/device_backend.h"

#include <array>

#include "core/kernels/registry.h"

namespace cadre {
namespace {

std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>& backends() {
  static auto* table = new std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>();
  return *table;
}

}  // namespace

DeviceBackend* device_backend(DeviceType type) {
  kernels::ensure_backends_registered();
  return backends()[static_cast<int>(type)].get();
}

void register_device_backend(DeviceType type, std::unique_ptr<DeviceBackend> backend) {
  backends()[static_cast<int>(type)] = std::move(backend);
}

}  // namespace cadre
