// OneDeviceStrategy: one replica on one device, variables there too. The default strategy,
// and the reference the others are checked against.
#pragma once

#include <memory>
#include <string>

#include "cadre/strategies/strategy.h"

namespace cadre {

class OneDeviceStrategy : public Strategy {
 public:
  // Throws InvalidArgumentError listing the available devices when `device` does not exist.
  static std::shared_ptr<OneDeviceStrategy> create(Device device = Device::cpu(0));
  std::string name() const override { return "one_device"; }

 private:
  explicit OneDeviceStrategy(std::unique_ptr<StrategyExtended> extended);
};

}  // namespace cadre
