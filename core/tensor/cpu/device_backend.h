// The host's DeviceBackend.
#pragma once

#include <memory>

#include "core/tensor/device_backend.h"

namespace cadre::backend::cpu {

// cpu:N for each of num_cpu_devices(): host memory from cpu_allocator(), copies by memcpy.
std::unique_ptr<DeviceBackend> make_device_backend();

}  // namespace cadre::backend::cpu
