// The GPU's DeviceBackend (built with CUDA only).
#pragma once

#include <memory>

#include "core/tensor/device_backend.h"

namespace cadre::backend::cuda {

// gpu:N for every visible GPU (none without a driver or a device, which unavailable_reason()
// explains).
std::unique_ptr<DeviceBackend> make_device_backend();

}  // namespace cadre::backend::cuda
