// MirroredStrategy: one replica per device of this host, each on its own thread, each with
// its own copy of every variable. Gradients are averaged across replicas by the
// CrossDeviceOps (packed into buckets) and every copy takes the same update, so the copies
// stay identical.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cadre/strategies/cross_device_ops.h"
#include "cadre/strategies/strategy.h"

namespace cadre {

class MirroredStrategy : public Strategy {
 public:
  // devices empty: every GPU, else cpu:0. cross_device_ops null: NcclAllReduce when every
  // device is a GPU, else HierarchicalCopyAllReduce. Throws InvalidArgumentError listing
  // the available devices for an unknown device or one named twice.
  static std::shared_ptr<MirroredStrategy> create(
      std::vector<Device> devices = {}, std::shared_ptr<CrossDeviceOps> cross_device_ops = nullptr);
  std::string name() const override { return "mirrored"; }

 private:
  explicit MirroredStrategy(std::unique_ptr<StrategyExtended> extended);
};

}  // namespace cadre
