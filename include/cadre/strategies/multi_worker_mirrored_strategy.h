// MultiWorkerMirroredStrategy: MirroredStrategy on each training task of a cluster, with
// gradients reduced within each worker first, then across workers: for CPU tensors through
// a shared-memory segment when every worker is on one host, else by Gloo's ring all-reduce
// over TCP; NCCL between the workers' GPUs.
//
// create() joins the cluster: the chief (worker 0 without one) serves the coordination
// service at its TF_CONFIG address, every training task registers with it (waiting for all
// of them, with a timeout naming the absent ones), heartbeats start, and the workers meet
// through the service's key-value store (a shared segment, or the Gloo mesh). Variables start
// identical everywhere (the same seed, or the same checkpoint), every worker makes the same
// updates, and each reads its own shard of the input (InputContext: one pipeline per worker).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/multi_worker_options.h"
#include "cadre/strategies/strategy.h"

namespace cadre {

// How workers exchange gradients (tf.distribute's CommunicationImplementation): RING in
// host memory for CPU tensors (shared memory on one host, Gloo's TCP ring across hosts;
// MultiWorkerOptions.shared_memory), NCCL for GPU tensors, or AUTO (NCCL when every local device is
// a GPU, else RING).
enum class Communication { kAuto, kRing, kNccl };

class MultiWorkerMirroredStrategy : public Strategy {
 public:
  // On an evaluator task, which is outside the training collective, the local devices'
  // replicas alone, as MirroredStrategy's, contacting no other task.
  // Throws InvalidArgumentError for a cluster with ps tasks or a task that does not train,
  // DeadlineExceededError naming the tasks that never registered, UnavailableError when the
  // chief's port cannot be bound.
  // NCCL without a CUDA build is an UnimplementedError (AUTO then falls back to the ring).
  static std::shared_ptr<MultiWorkerMirroredStrategy> create(
      const ClusterConfig& cluster, std::vector<Device> local_devices = {},
      MultiWorkerOptions options = {}, Communication communication = Communication::kAuto);
  std::string name() const override { return "multi_worker_mirrored"; }

 private:
  explicit MultiWorkerMirroredStrategy(std::unique_ptr<StrategyExtended> extended);
};

}  // namespace cadre
