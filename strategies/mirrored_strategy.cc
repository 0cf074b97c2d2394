#include "cadre/strategies/mirrored_strategy.h"

#include <algorithm>

#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

class MirroredExtended final : public StrategyExtended {
 public:
  MirroredExtended(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> ops)
      : StrategyExtended(std::move(devices), std::move(ops)) {}
  Device variable_device(int replica) const override { return devices()[replica]; }
  bool mirrors_variables() const override { return true; }
};

}  // namespace

MirroredStrategy::MirroredStrategy(std::unique_ptr<StrategyExtended> extended)
    : Strategy(std::move(extended)) {}

std::unique_ptr<StrategyExtended> local_mirrored_extended(std::vector<Device> devices,
                                                          std::shared_ptr<CrossDeviceOps> ops) {
  if (devices.empty()) devices = parse_devices("");
  if (!ops) {
    for (const Device& d : devices) check_device(d);  // a clear error before picking ops
    bool all_gpus =
        std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_gpu(); });
    ops = all_gpus ? nccl_all_reduce() : hierarchical_copy_all_reduce();
  }
  return std::make_unique<MirroredExtended>(std::move(devices), std::move(ops));
}

std::shared_ptr<MirroredStrategy> MirroredStrategy::create(std::vector<Device> devices,
                                                           std::shared_ptr<CrossDeviceOps> ops) {
  return std::shared_ptr<MirroredStrategy>(
      new MirroredStrategy(local_mirrored_extended(std::move(devices), std::move(ops))));
}

}  // namespace cadre
