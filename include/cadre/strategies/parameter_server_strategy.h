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
// Non-trainable floating-point variables (batch normalisation's moving statistics) live on
// the ps tasks too, each worker's step adding its change to them there; integer counters
// stay on each worker, and checkpoints take the chief's. The optimizer must be describable as data
// (Optimizer::config(): sgd, adam, adagrad, rmsprop, with any built-in schedule); clipping
// happens on the worker, per push.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/parameter_server_options.h"
#include "cadre/strategies/strategy.h"

namespace cadre {

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
  std::string name() const override { return "parameter_server"; }

 private:
  explicit ParameterServerStrategy(std::unique_ptr<StrategyExtended> extended);
};

// Bytes exchanged with the ps tasks so far, requests and responses whole; and of them, the
// pushes of gradients and the pulls of values (creation and checkpoint reads aside).
struct ParameterServerTraffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t bytes_pushed = 0;
  int64_t bytes_pulled = 0;
};

// The traffic of `strategy` with its ps tasks; nullopt for a strategy whose variables do not
// live on ps tasks. For programs that hold any Strategy (strategy_from_flags) and report
// what a parameter-server run moved. Thread-safe.
std::optional<ParameterServerTraffic> parameter_server_traffic(const Strategy& strategy);

}  // namespace cadre
