// CentralStorageStrategy: one copy of every variable on one device (the CPU by default),
// computation replicated on the compute devices, each replica reading the variables onto
// its own device. Gradients are averaged on the way back and applied once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cadre/strategies/strategy.h"

namespace cadre {

class CentralStorageStrategy : public Strategy {
 public:
  // compute_devices empty: every GPU, else cpu:0. parameter_device: where the variables
  // live. Throws InvalidArgumentError for unknown or repeated devices, listing the
  // available ones.
  static std::shared_ptr<CentralStorageStrategy> create(std::vector<Device> compute_devices = {},
                                                        Device parameter_device = Device::cpu(0));
  std::string name() const override { return "central_storage"; }

 private:
  explicit CentralStorageStrategy(std::unique_ptr<StrategyExtended> extended);
};

}  // namespace cadre
