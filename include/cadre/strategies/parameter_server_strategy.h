// ParameterServerStrategy: variables live on the ps tasks of a cluster, workers train
// asynchronously against them (TensorFlow's ParameterServerStrategy, as Estimator ran it).
//
// Each step a worker pulls the variables it needs (embedding tables: only the rows it looks
// up), computes gradients on its local devices (reduced locally first), and pushes them;
// the ps tasks apply the optimizer. Workers do not wait for each other. Variables are
// spread over the ps tasks by size (or round robin), large ones in row slices on several
// tasks, while model_fn sees one logical variable. The global step lives on ps 0 and grows
// by one per worker step. The chief initialises (or restores) every variable and its
// optimizer state; the other workers wait for that, and take the global step from ps 0.
// Checkpoints hold logical, whole variables: they restore under any other strategy and
// under any number of ps tasks.
//
// Non-trainable variables (batch normalisation's moving statistics) stay on each worker,
// and checkpoints take the chief's. The optimizer must be describable as data
// (Optimizer::config(): sgd, adam, adagrad, rmsprop, with any built-in schedule); clipping
// happens on the worker, per push.
#pragma once

#include <memory>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/strategy.h"
#include "strategies/ps/placement.h"

namespace cadre {

namespace ps {
class PsClient;
}

struct ParameterServerOptions {
  ps::PlacementOptions placement;
  // The largest message to or from a ps task (larger ones fail with ResourceExhaustedError).
  int64_t max_message_bytes = int64_t{256} << 20;
  double connect_timeout_seconds = 300;  // for every ps task to answer at start-up
  double init_timeout_seconds = 300;     // for the chief's variables and optimizer state
  double rpc_timeout_seconds = 60;       // for each pull and push
  // > 0: gradients computed on variables more than this many global steps old are dropped
  // (the ps reports it, and the worker goes on with fresh variables).
  int64_t max_staleness = 0;
};

class ParameterServerStrategy : public Strategy {
 public:
  // A training task of `cluster` (the chief or a worker), computing on `local_devices`
  // (empty: every GPU, else cpu:0). Throws InvalidArgumentError when the cluster has no ps
  // tasks, naming the alternative. Connecting waits for the ps tasks (up to
  // connect_timeout_seconds, then DeadlineExceededError naming the absent ones) and happens
  // when variables are first created, so that a ps task can build this object too.
  static std::shared_ptr<ParameterServerStrategy> create(const ClusterConfig& cluster,
                                                         std::vector<Device> local_devices = {},
                                                         ParameterServerOptions options = {});
  ~ParameterServerStrategy() override;

  std::string name() const override { return "parameter_server"; }
  Device variable_device(int replica) const override { return Device::cpu(0); }
  bool mirrors_variables() const override { return false; }
  int num_workers() const override { return cluster_.num_worker_replicas(); }
  int worker_index() const override { return cluster_.global_task_id(); }
  int num_workers_in_sync() const override { return 1; }
  // The chief sets the global step on ps 0; the others wait for it and take it.
  int64_t broadcast_from_chief(int64_t value) const override;

  std::unique_ptr<DistributedVariables> create_variables(
      uint64_t seed, nn::VariableCreator creator = nn::default_variable_creator) const override;
  void before_run(DistributedVariables& variables) const override;
  void update_shared(DistributedVariables& variables, nn::Optimizer& optimizer,
                     std::vector<Gradient> gradients,
                     const std::vector<nn::Variable*>& targets) const override;
  int64_t global_step_after(DistributedVariables& variables, int64_t step) const override;
  std::shared_ptr<const nn::VariableStore> variables_to_save(
      DistributedVariables& variables) const override;

  const ParameterServerOptions& options() const { return options_; }
  const ClusterConfig& cluster() const { return cluster_; }
  // Bytes sent to and received from the ps tasks so far, requests and responses whole; and
  // of them, the pushes of gradients and the pulls of values (creation and checkpoint reads
  // aside).
  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  int64_t bytes_pushed() const;
  int64_t bytes_pulled() const;

 private:
  ParameterServerStrategy(std::vector<Device> devices, ClusterConfig cluster,
                          ParameterServerOptions options);
  void connect() const;

  ClusterConfig cluster_;
  ParameterServerOptions options_;
  std::vector<std::unique_ptr<ps::PsClient>> clients_;
  mutable std::once_flag connected_;
};

}  // namespace cadre
