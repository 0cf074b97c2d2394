// OneDeviceStrategy: one replica on one device, variables there too. The default strategy,
// and the reference the others are checked against.
#pragma once

#include <memory>

#include "cadre/strategies/strategy.h"

namespace cadre {

class OneDeviceStrategy : public Strategy {
 public:
  // Throws InvalidArgumentError listing the available devices when `device` does not exist.
  static std::shared_ptr<OneDeviceStrategy> create(Device device = Device::cpu(0));
  std::string name() const override { return "one_device"; }
  Device variable_device(int replica) const override { return devices()[0]; }
  bool mirrors_variables() const override { return false; }

 private:
  explicit OneDeviceStrategy(Device device);
};

}  // namespace cadre
