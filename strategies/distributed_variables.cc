#include "cadre/strategies/distributed_variables.h"

namespace cadre {

DistributedVariables::DistributedVariables(std::vector<std::unique_ptr<nn::VariableStore>> stores)
    : stores_(std::move(stores)) {}

nn::VariableStore& DistributedVariables::store(int replica) {
  return stores_.size() == 1 ? *stores_[0] : *stores_.at(replica);
}

}  // namespace cadre
