#include "cadre/strategies/parameter_server_strategy.h"

#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_variables.h"

namespace cadre {
namespace {

ps::PsVariables& ps_variables(DistributedVariables& variables) {
  return static_cast<ps::PsVariables&>(variables);  // made by create_variables below
}

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(std::vector<Device> devices, ClusterConfig cluster,
                                                 ParameterServerOptions options)
    : Strategy(std::move(devices), reduction_to_one_device(Device::cpu(0))),
      cluster_(std::move(cluster)),
      options_(options) {
  ps::ClientOptions client;
  client.max_message_bytes = options_.max_message_bytes;
  client.rpc_timeout_seconds = options_.rpc_timeout_seconds;
  for (int i = 0; i < cluster_.num_ps_replicas(); ++i) {
    clients_.push_back(
        std::make_unique<ps::PsClient>(i, cluster_.address(TaskId{"ps", i}), client));
  }
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

std::shared_ptr<ParameterServerStrategy> ParameterServerStrategy::create(
    const ClusterConfig& cluster, std::vector<Device> local_devices,
    ParameterServerOptions options) {
  if (cluster.num_ps_replicas() == 0) {
    throw InvalidArgumentError(
        "ParameterServerStrategy needs ps tasks in TF_CONFIG's cluster (\"ps\": [\"host:port\", "
        "...]); without a cluster, CentralStorageStrategy keeps the variables on the CPU "
        "the same way");
  }
  if (options.max_message_bytes <= 0 || options.connect_timeout_seconds <= 0 ||
      options.init_timeout_seconds <= 0 || options.rpc_timeout_seconds <= 0 ||
      options.max_staleness < 0) {
    throw InvalidArgumentError(
        "ParameterServerOptions: max_message_bytes and the timeouts must be positive, "
        "max_staleness >= 0");
  }
  if (local_devices.empty()) local_devices = parse_devices("");
  for (const Device& d : local_devices) check_device(d);
  return std::shared_ptr<ParameterServerStrategy>(
      new ParameterServerStrategy(std::move(local_devices), cluster, options));
}

void ParameterServerStrategy::connect() const {
  std::call_once(connected_, [&] {
    if (cluster_.global_task_id() < 0) {
      throw InvalidArgumentError(str_cat("task ", cluster_.task.to_string(),
                                         " does not train (only the chief and the workers do)"));
    }
    LOG(INFO) << cluster_.task.to_string() << ": connecting to " << clients_.size()
              << " parameter server(s)";
    for (const auto& client : clients_) client->wait_until_ready(options_.connect_timeout_seconds);
  });
}

int64_t ParameterServerStrategy::broadcast_from_chief(int64_t value) const {
  connect();
  if (cluster_.is_chief()) return clients_[0]->global_step(value, options_.init_timeout_seconds);
  LOG(INFO) << cluster_.task.to_string() << ": waiting for the chief to set the global step";
  return clients_[0]->global_step(std::nullopt, options_.init_timeout_seconds);
}

std::unique_ptr<DistributedVariables> ParameterServerStrategy::create_variables(
    uint64_t seed, nn::VariableCreator creator) const {
  connect();
  return std::make_unique<ps::PsVariables>(clients_, options_, cluster_.is_chief(), seed,
                                           std::move(creator), num_local_replicas());
}

void ParameterServerStrategy::before_run(DistributedVariables& variables) const {
  ps_variables(variables).pull();
}

void ParameterServerStrategy::update_shared(DistributedVariables& variables,
                                            nn::Optimizer& optimizer,
                                            std::vector<Gradient> gradients,
                                            const std::vector<nn::Variable*>& targets) const {
  ps_variables(variables).push(optimizer, std::move(gradients), targets);
}

int64_t ParameterServerStrategy::global_step_after(DistributedVariables& variables,
                                                   int64_t step) const {
  return ps_variables(variables).global_step();
}

std::shared_ptr<const nn::VariableStore> ParameterServerStrategy::variables_to_save(
    DistributedVariables& variables) const {
  return ps_variables(variables).gather();
}

namespace {

int64_t total(const std::vector<std::unique_ptr<ps::PsClient>>& clients,
              int64_t (ps::PsClient::*count)() const) {
  int64_t sum = 0;
  for (const auto& c : clients) sum += (*c.*count)();
  return sum;
}

}  // namespace

int64_t ParameterServerStrategy::bytes_sent() const {
  return total(clients_, &ps::PsClient::bytes_sent);
}
int64_t ParameterServerStrategy::bytes_received() const {
  return total(clients_, &ps::PsClient::bytes_received);
}
int64_t ParameterServerStrategy::bytes_pushed() const {
  return total(clients_, &ps::PsClient::bytes_pushed);
}
int64_t ParameterServerStrategy::bytes_pulled() const {
  return total(clients_, &ps::PsClient::bytes_pulled);
}

}  // namespace cadre
