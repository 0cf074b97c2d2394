#include "cadre/strategies/parameter_server_strategy.h"

#include <glog/logging.h>

#include <mutex>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_variables.h"
#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

// The variables of a training run are made by create_variables below; others (an
// evaluation's copies, restored from a checkpoint in this process) are not on the ps tasks.
ps::PsVariables* on_ps(DistributedVariables& variables) {
  return dynamic_cast<ps::PsVariables*>(&variables);
}

ps::PsVariables& ps_variables(DistributedVariables& variables) {
  ps::PsVariables* remote = on_ps(variables);
  if (remote == nullptr) {
    throw InternalError(
        "ParameterServerStrategy: these variables were not made by its create_variables, so "
        "they are not on the ps tasks");
  }
  return *remote;
}

// Variables on the ps tasks, pulled before each step and updated there by the gradients
// each worker pushes; the workers step on their own.
class ParameterServerExtended final : public StrategyExtended {
 public:
  ParameterServerExtended(std::vector<Device> devices, ClusterConfig cluster,
                          const ParameterServerOptions& options)
      : StrategyExtended(std::move(devices), reduction_to_one_device(Device::cpu(0))),
        cluster_(std::move(cluster)),
        servers_(cluster_, options) {}

  Device variable_device(int replica) const override { return Device::cpu(0); }
  bool mirrors_variables() const override { return false; }
  int num_workers() const override { return cluster_.num_worker_replicas(); }
  int worker_index() const override { return cluster_.global_task_id(); }
  int num_workers_in_sync() const override { return 1; }
  const ps::ParameterServers* parameter_servers() const override { return &servers_; }
  std::string reduction() const override {
    std::string push = str_cat("pushed to ", cluster_.num_ps_replicas(),
                               " ps task(s), which apply them asynchronously");
    if (num_local_replicas() == 1) return push;
    return str_cat(StrategyExtended::reduction(), ", then ", push);
  }

  // The chief sets the global step on ps 0; the others wait for it and take it.
  int64_t broadcast_from_chief(int64_t value) const override {
    connect();
    ps::PsClient& ps0 = *servers_.clients()[0];
    double timeout = servers_.options().init_timeout_seconds;
    if (cluster_.is_chief()) return ps0.global_step(value, timeout);
    LOG(INFO) << cluster_.task.to_string() << ": waiting for the chief to set the global step";
    return ps0.global_step(std::nullopt, timeout);
  }

  std::unique_ptr<DistributedVariables> create_variables(
      uint64_t seed, nn::VariableCreator creator) const override {
    return create_restored_variables(seed, std::move(creator), {});
  }
  // Only the chief's sources count: the others take the values the ps tasks hold.
  std::unique_ptr<DistributedVariables> create_restored_variables(
      uint64_t seed, nn::VariableCreator creator, VariableSourceFn sources) const override {
    connect();
    return std::make_unique<ps::PsVariables>(servers_, cluster_.is_chief(), seed,
                                             std::move(creator), std::move(sources));
  }
  void before_run(DistributedVariables& variables) const override {
    if (ps::PsVariables* remote = on_ps(variables)) remote->pull();
  }

  // A worker's stop restarts it alone and loses nothing (its steps are on the ps tasks);
  // the chief's ends every worker's steps, since the job resumes from its checkpoint.
  void announce_planned_stop() const override {
    if (!cluster_.is_chief()) return;
    for (const auto& client : servers_.clients()) {
      try {
        client->planned_stop();
      } catch (const Error& e) {
        LOG(WARNING) << "a planned stop: " << e.what();
      }
    }
  }
  unsigned take_step_signal() const override {
    unsigned signals = StrategyExtended::take_step_signal();
    for (const auto& client : servers_.clients()) {
      if (client->take_planned_stop()) signals |= kStop;
    }
    return signals;
  }
  void update_shared(DistributedVariables& variables, nn::Optimizer& optimizer,
                     std::vector<Gradient> gradients,
                     const std::vector<nn::Variable*>& targets) const override {
    ps_variables(variables).push(optimizer, std::move(gradients), targets);
  }
  int64_t global_step_after(DistributedVariables& variables, int64_t step) const override {
    return ps_variables(variables).global_step();
  }
  std::shared_ptr<const nn::VariableStore> variables_to_save(
      DistributedVariables& variables) const override {
    return ps_variables(variables).gather();
  }
  int checkpoint_parts(DistributedVariables& variables) const override {
    return ps_variables(variables).checkpoint_parts();
  }
  std::shared_ptr<const nn::VariableStore> save_parts(
      DistributedVariables& variables, const std::string& directory,
      const std::vector<std::string>& part_names, int64_t step,
      std::vector<SavedPart>* parts) const override {
    return ps_variables(variables).save_parts(directory, part_names, step, parts);
  }

 private:
  // Waits for the ps tasks, once: on first use rather than at creation, so that a ps task
  // can build the strategy too.
  void connect() const {
    std::call_once(connected_, [&] {
      // The client of coordinator mode creates the variables and reads them for checkpoints.
      if (cluster_.global_task_id() < 0 && cluster_.task.type != "client") {
        throw InvalidArgumentError(
            str_cat("task ", cluster_.task.to_string(),
                    " does not train (only the chief, the workers and a client do)"));
      }
      LOG(INFO) << cluster_.task.to_string() << ": connecting to " << servers_.clients().size()
                << " parameter server(s)";
      servers_.wait_until_ready();
    });
  }

  ClusterConfig cluster_;
  ps::ParameterServers servers_;
  mutable std::once_flag connected_;
};

}  // namespace

ParameterServerStrategy::ParameterServerStrategy(std::unique_ptr<StrategyExtended> extended)
    : Strategy(std::move(extended)) {}

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
  return std::shared_ptr<ParameterServerStrategy>(new ParameterServerStrategy(
      std::make_unique<ParameterServerExtended>(std::move(local_devices), cluster, options)));
}

std::optional<ParameterServerTraffic> parameter_server_traffic(const Strategy& strategy) {
  const ps::ParameterServers* servers = strategy.extended().parameter_servers();
  if (servers == nullptr) return std::nullopt;
  return servers->traffic();
}

}  // namespace cadre
