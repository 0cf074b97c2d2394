// Joining the training tasks of a cluster: the chief (worker 0 without one) serves the
// coordination service at its TF_CONFIG address, every training task registers with it and
// heartbeats, and a collective connects them through the service's key-value store: shared
// memory when they are on one host, else a Gloo mesh.
// MultiWorkerMirroredStrategy and `cadre_bench allreduce` stand on it.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/multi_worker_options.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/collectives/collective.h"

namespace cadre {

struct ElasticMembership;  // strategies/cluster/elastic_group.h

struct WorkerGroup {
  WorkerGroup();
  std::unique_ptr<CoordinationService> service;  // on the chief only
  std::unique_ptr<CoordinationClient> client;
  std::unique_ptr<ProcessCollective> collective;  // host memory; rank = the task's global id
  std::atomic<bool> collective_failed{false};     // an operation of `collective` threw
  std::string task;                               // this task's name ("chief:0")
  std::unique_ptr<ElasticMembership> elastic;     // null unless CoordinationOptions.elastic

  // Waits (up to 30 s) for every task at the shutdown barrier, so that the chief's service
  // outlives the others' last calls, unless a collective failed (a peer may be dead) or an
  // exception is ending this task: then it leaves the collective at once, so that the others'
  // collectives fail now. Then stops heartbeats and the service, which after a failure
  // first waits (up to 2 s) until the other tasks have heard it.
  ~WorkerGroup();
};

// A cluster of one training task and no client (a chief alone) is a group of one that
// contacts no one: no coordination service, no port, no secret, and its collective's
// operations leave the data as it is. Throws InvalidArgumentError for a task that does not
// train, DeadlineExceededError naming the tasks that never registered, UnavailableError when
// the chief's port cannot be bound.
std::unique_ptr<WorkerGroup> join_worker_group(const ClusterConfig& cluster,
                                               const MultiWorkerOptions& options = {});

}  // namespace cadre
