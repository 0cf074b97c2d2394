#include "strategies/strategy_extended.h"

#include <cmath>
#include <set>
#include <string>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

StrategyExtended::StrategyExtended(std::vector<Device> devices,
                                   std::shared_ptr<CrossDeviceOps> cross_device_ops)
    : devices_(std::move(devices)), cross_device_ops_(std::move(cross_device_ops)) {
  if (devices_.empty()) {
    throw InvalidArgumentError(
        str_cat("a strategy needs at least one device; available: ", join(available_devices())));
  }
  std::set<std::string> seen;
  for (const Device& d : devices_) {
    check_device(d);
    if (!seen.insert(d.to_string()).second) {
      throw InvalidArgumentError(
          str_cat("device ", d, " is named twice in the strategy's devices (", join(devices_),
                  "); available: ", join(available_devices())));
    }
  }
  if (!cross_device_ops_) cross_device_ops_ = hierarchical_copy_all_reduce();
}

StrategyExtended::~StrategyExtended() = default;

std::vector<int> StrategyExtended::workers_by_rank() const {
  std::vector<int> workers(static_cast<size_t>(num_workers()));
  for (size_t w = 0; w < workers.size(); ++w) workers[w] = static_cast<int>(w);
  return workers;
}

std::string StrategyExtended::reduction() const {
  if (num_local_replicas() == 1) return "none (one replica)";
  return str_cat(cross_device_ops().name(), " over ", num_local_replicas(), " replica(s)",
                 mirrors_variables() ? "" : str_cat(" onto the variables on ", variable_device(0)));
}

std::unique_ptr<DistributedVariables> StrategyExtended::create_variables(
    uint64_t seed, nn::VariableCreator creator) const {
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  int copies = mirrors_variables() ? num_local_replicas() : 1;
  std::vector<nn::VariableCreator> creators = copy_creators(std::move(creator), copies);
  for (int r = 0; r < copies; ++r) {
    Device device = variable_device(r);
    stores.push_back(std::make_unique<nn::VariableStore>(
        seed, [device, creator = creators[r]](const nn::VariableSpec& spec, uint64_t s) {
          DeviceScope scope(device);
          return creator(spec, s);
        }));
  }
  return std::make_unique<DistributedVariables>(std::move(stores));
}

std::vector<nn::VariableCreator> StrategyExtended::copy_creators(nn::VariableCreator creator,
                                                                 int copies) const {
  return std::vector<nn::VariableCreator>(static_cast<size_t>(copies), creator);
}

void StrategyExtended::update_shared(DistributedVariables&, nn::Optimizer& optimizer,
                                     std::vector<Gradient> gradients,
                                     const std::vector<nn::Variable*>& targets) const {
  optimizer.apply_gradients(std::move(gradients), targets);
}

std::shared_ptr<const nn::VariableStore> StrategyExtended::variables_to_save(
    DistributedVariables& variables) const {
  return std::shared_ptr<const nn::VariableStore>(std::shared_ptr<void>(), &variables.primary());
}

std::shared_ptr<const nn::VariableStore> StrategyExtended::save_parts(
    DistributedVariables& variables, const std::string& directory,
    const std::vector<std::string>& part_names, int64_t step, std::vector<SavedPart>* parts) const {
  return variables_to_save(variables);
}

double StrategyExtended::encode_step_signals(unsigned signals) {
  return ((signals & kCheckpoint) ? 1.0 : 0.0) + ((signals & kStop) ? 4096.0 : 0.0);
}

unsigned StrategyExtended::decode_step_signals(double sum) {
  auto n = static_cast<int64_t>(std::llround(sum));
  return (n % 4096 > 0 ? kCheckpoint : 0u) | (n >= 4096 ? kStop : 0u);
}

}  // namespace cadre
