#include "strategies/ps/parameter_servers.h"

#include "strategies/cluster/grpc_security.h"
#include "strategies/ps/ps_client.h"

namespace cadre::ps {

ParameterServers::ParameterServers(const ClusterConfig& cluster,
                                   const ParameterServerOptions& options)
    : options_(options) {
  ClientOptions client;
  client.max_message_bytes = options_.max_message_bytes;
  client.rpc_timeout_seconds = options_.rpc_timeout_seconds;
  client.security = cluster.security;
  // An evaluator evaluates on its local devices and reaches no ps task; nor has it the job's
  // secret (RunConfig::from_environment reads none for it).
  if (cluster.task.type == "evaluator") return;
  if (cluster.num_ps_replicas() > 0)
    check_security_configured(cluster.security, cluster.task.to_string());
  for (int i = 0; i < cluster.num_ps_replicas(); ++i) {
    clients_.push_back(std::make_unique<PsClient>(i, cluster.address(TaskId{"ps", i}), client));
  }
}

ParameterServers::~ParameterServers() = default;

void ParameterServers::wait_until_ready() const {
  for (const auto& client : clients_) client->wait_until_ready(options_.connect_timeout_seconds);
}

ParameterServerTraffic ParameterServers::traffic() const {
  ParameterServerTraffic traffic;
  for (const auto& c : clients_) {
    traffic.bytes_sent += c->bytes_sent();
    traffic.bytes_received += c->bytes_received();
    traffic.bytes_pushed += c->bytes_pushed();
    traffic.bytes_pulled += c->bytes_pulled();
  }
  return traffic;
}

}  // namespace cadre::ps
