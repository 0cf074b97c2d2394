#include "cadre/strategies/central_storage_strategy.h"

#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

class CentralStorageExtended final : public StrategyExtended {
 public:
  CentralStorageExtended(std::vector<Device> devices, Device parameter_device)
      : StrategyExtended(std::move(devices), reduction_to_one_device(parameter_device)),
        parameter_device_(parameter_device) {}
  Device variable_device(int replica) const override { return parameter_device_; }
  bool mirrors_variables() const override { return false; }

 private:
  Device parameter_device_;
};

}  // namespace

CentralStorageStrategy::CentralStorageStrategy(std::unique_ptr<StrategyExtended> extended)
    : Strategy(std::move(extended)) {}

std::shared_ptr<CentralStorageStrategy> CentralStorageStrategy::create(
    std::vector<Device> compute_devices, Device parameter_device) {
  check_device(parameter_device);
  if (compute_devices.empty()) compute_devices = parse_devices("");
  return std::shared_ptr<CentralStorageStrategy>(new CentralStorageStrategy(
      std::make_unique<CentralStorageExtended>(std::move(compute_devices), parameter_device)));
}

}  // namespace cadre
