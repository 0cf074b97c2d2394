// The three single-host strategies' construction; everything else is Strategy's.
#include "cadre/strategies/central_storage_strategy.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/one_device_strategy.h"
#include "core/base/strings.h"

namespace cadre {

OneDeviceStrategy::OneDeviceStrategy(Device device)
    : Strategy({device}, reduction_to_one_device(device)) {}

std::shared_ptr<OneDeviceStrategy> OneDeviceStrategy::create(Device device) {
  return std::shared_ptr<OneDeviceStrategy>(new OneDeviceStrategy(device));
}

namespace {

std::vector<Device> or_default(std::vector<Device> devices) {
  return devices.empty() ? parse_devices("") : devices;
}

bool all_gpus(const std::vector<Device>& devices) {
  for (const Device& d : devices) {
    if (!d.is_gpu()) return false;
  }
  return true;
}

}  // namespace

MirroredStrategy::MirroredStrategy(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> ops)
    : Strategy(std::move(devices), std::move(ops)) {}

std::shared_ptr<MirroredStrategy> MirroredStrategy::create(std::vector<Device> devices,
                                                           std::shared_ptr<CrossDeviceOps> ops) {
  devices = or_default(std::move(devices));
  if (!ops) {
    for (const Device& d : devices) check_device(d);  // a clear error before picking ops
    ops = all_gpus(devices) ? nccl_all_reduce() : hierarchical_copy_all_reduce();
  }
  return std::shared_ptr<MirroredStrategy>(
      new MirroredStrategy(std::move(devices), std::move(ops)));
}

CentralStorageStrategy::CentralStorageStrategy(std::vector<Device> devices, Device parameter_device)
    : Strategy(std::move(devices), reduction_to_one_device(parameter_device)),
      parameter_device_(parameter_device) {}

std::shared_ptr<CentralStorageStrategy> CentralStorageStrategy::create(
    std::vector<Device> compute_devices, Device parameter_device) {
  check_device(parameter_device);
  return std::shared_ptr<CentralStorageStrategy>(
      new CentralStorageStrategy(or_default(std::move(compute_devices)), parameter_device));
}

}  // namespace cadre
