// MultiWorkerMirroredStrategy: MirroredStrategy on each training task of a cluster, with
// gradients reduced within each worker first, then across workers by Gloo's ring
// all-reduce over TCP for CPU tensors, or NCCL between the workers' GPUs.
//
// create() joins the cluster: the chief (worker 0 without one) serves the coordination
// service at its TF_CONFIG address, every training task registers with it (waiting for all
// of them, with a timeout naming the absent ones), heartbeats start, and the Gloo mesh is
// built through the service's key-value store. Variables start identical everywhere (the
// same seed, or the same checkpoint), every worker makes the same updates, and each reads
// its own shard of the input (InputContext: one pipeline per worker).
#pragma once

#include <memory>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/strategy.h"
#include "strategies/cluster/worker_group.h"

namespace cadre {

class GpuCollective;

using MultiWorkerOptions = WorkerGroupOptions;

// How workers exchange gradients (tf.distribute's CommunicationImplementation): Gloo's ring
// over TCP for CPU tensors, NCCL for GPU tensors, or AUTO (NCCL when every local device is a
// GPU, else RING).
enum class Communication { kAuto, kRing, kNccl };

class MultiWorkerMirroredStrategy : public Strategy {
 public:
  // Throws InvalidArgumentError for a cluster with ps tasks or a task that does not train,
  // DeadlineExceededError naming the tasks that never registered, UnavailableError when the
  // chief's port cannot be bound.
  // NCCL without a CUDA build is an UnimplementedError (AUTO then falls back to the ring).
  ~MultiWorkerMirroredStrategy() override;
  static std::shared_ptr<MultiWorkerMirroredStrategy> create(
      const ClusterConfig& cluster, std::vector<Device> local_devices = {},
      MultiWorkerOptions options = {}, Communication communication = Communication::kAuto);
  std::string name() const override { return "multi_worker_mirrored"; }
  Device variable_device(int replica) const override { return devices()[replica]; }
  bool mirrors_variables() const override { return true; }
  int num_workers() const override { return group_->collective->size(); }
  int worker_index() const override { return group_->collective->rank(); }
  void cross_worker_sum(std::vector<Gradient>& values, double& weight) const override;
  int64_t broadcast_from_chief(int64_t value) const override;
  // The failure the coordination service reported (a dead task), empty while healthy.
  std::string cluster_failure() const { return group_->client->failure(); }

 protected:
  // Every variable starts as the chief's (TensorFlow's MultiWorkerMirrored initializes by
  // broadcast): local replica 0 makes it and replaces its value by the chief's in a
  // broadcast (all workers create variables in the same order, as they run the same
  // model_fn); the other local replicas take replica 0's value.
  std::vector<nn::VariableCreator> copy_creators(nn::VariableCreator creator,
                                                 int copies) const override;

 private:
  MultiWorkerMirroredStrategy(std::vector<Device> devices, std::unique_ptr<WorkerGroup> group,
                              std::unique_ptr<GpuCollective> gpus, double timeout_seconds);
  std::unique_ptr<WorkerGroup> group_;
  std::unique_ptr<GpuCollective> gpus_;  // NCCL across workers, else Gloo through the host
  double timeout_seconds_;
};

}  // namespace cadre
