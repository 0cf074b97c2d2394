#include "strategies/cluster/worker_group.h"

#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/host_collective.h"

namespace cadre {

WorkerGroup::~WorkerGroup() {
  if (!client) return;
  try {
    client->barrier("shutdown", 30);
  } catch (const std::exception& e) {
    LOG(WARNING) << "shutdown barrier: " << e.what();
  }
  client->stop_heartbeats();
  if (service) service->stop();
}

std::unique_ptr<WorkerGroup> join_worker_group(const ClusterConfig& cluster,
                                               const MultiWorkerOptions& options) {
  int rank = cluster.global_task_id();
  if (rank < 0) {
    throw InvalidArgumentError(str_cat("task ", cluster.task.to_string(),
                                       " does not train (only the chief and the workers do)"));
  }
  std::vector<TaskId> tasks = cluster.training_tasks();
  std::string chief_address = cluster.address(cluster.chief());
  auto group = std::make_unique<WorkerGroup>();
  if (cluster.is_chief()) {
    group->service =
        CoordinationService::start(chief_address, tasks, options.coordination, cluster.security);
  }
  group->client = CoordinationClient::connect(chief_address, cluster.task, options.coordination,
                                             cluster.security);
  group->client->register_task(options.registration_timeout_seconds);
  std::string own = cluster.address(cluster.task);
  std::string host = own.substr(0, own.rfind(':'));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  HostCollectiveOptions collective;
  collective.transport = options.shared_memory ? HostTransport::kAuto : HostTransport::kGloo;
  collective.timeout_seconds = options.collective_timeout_seconds;
  CoordinationClient* client = group->client.get();
  collective.peer_failure = [client] { return client->failure(); };
  for (const TaskId& task : tasks) collective.rank_names.push_back(task.to_string());
  group->collective = host_collective(*group->client, rank, static_cast<int>(tasks.size()), host,
                                      collective);
  return group;
}

}  // namespace cadre
