#include "cadre/strategies/one_device_strategy.h"

#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

class OneDeviceExtended final : public StrategyExtended {
 public:
  explicit OneDeviceExtended(Device device)
      : StrategyExtended({device}, reduction_to_one_device(device)) {}
  Device variable_device(int replica) const override { return devices()[0]; }
  bool mirrors_variables() const override { return false; }
};

}  // namespace

OneDeviceStrategy::OneDeviceStrategy(std::unique_ptr<StrategyExtended> extended)
    : Strategy(std::move(extended)) {}

std::shared_ptr<OneDeviceStrategy> OneDeviceStrategy::create(Device device) {
  return std::shared_ptr<OneDeviceStrategy>(
      new OneDeviceStrategy(std::make_unique<OneDeviceExtended>(device)));
}

}  // namespace cadre
