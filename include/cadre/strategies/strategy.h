// Distribution strategies, as tf.distribute: where variables live, how many replicas compute
// each step (a thread per local device), how their values are combined, and how input is
// spread over them. The same object serves the Estimator (RunConfig::train_distribute) and
// custom training loops:
//
//   auto strategy = MirroredStrategy::create({Device::cpu(0), Device::cpu(1)});
//   auto variables = strategy->create_variables(/*seed=*/42);
//   DistributedIterator batches =
//       strategy->distribute_datasets_from_function(input_fn).make_iterator();
//   while (auto per_replica = batches.next()) {
//     PerReplica<double> losses = strategy->run<double>(*variables, [&](ReplicaContext& ctx) {
//       GradientTape tape;
//       const Element& batch = (*per_replica)[ctx.replica_id()];
//       Tensor loss = ...model..., batch ...;
//       ctx.apply_gradients(*optimizer, tape.gradient(loss, ctx.trainable_sources()), batch_size);
//       return loss.item<double>();
//     });
//   }
//
// This is the user's side of a strategy. What the framework drives inside a step (pulling
// and pushing parameter-server variables, sums across workers, the variables a checkpoint
// holds) is the strategy's extended object (tf.distribute's StrategyExtended), internal to
// Cadre.
//
// A Strategy is immutable after creation and may serve several runs one after another; one
// run() at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/io/dataset.h"
#include "cadre/io/input_context.h"
#include "cadre/io/input_fn.h"
#include "cadre/nn/variable_store.h"
#include "cadre/random/generator.h"
#include "cadre/strategies/distributed_dataset.h"
#include "cadre/strategies/distributed_variables.h"
#include "cadre/strategies/per_replica.h"
#include "cadre/strategies/replica_context.h"
#include "cadre/tensor/device.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

class ReplicaThreads;
class StrategyExtended;

class Strategy {
 public:
  virtual ~Strategy();
  // "one_device", "mirrored", "central_storage", "multi_worker_mirrored" or
  // "parameter_server" (what strategy_from_flags takes).
  virtual std::string name() const = 0;
  // The devices of this process that replicas compute on, one replica each.
  const std::vector<Device>& devices() const;
  int num_local_replicas() const { return static_cast<int>(devices().size()); }
  // Processes (workers) training together, and this one's index among them.
  int num_workers() const;
  int worker_index() const;
  // Workers whose replicas step together, reducing their gradients: every worker for the
  // collective strategies, 1 with parameter servers (each worker steps on its own).
  int num_workers_in_sync() const;
  // Replicas that share one global batch: the local ones of every worker in sync.
  int num_replicas_in_sync() const { return num_local_replicas() * num_workers_in_sync(); }
  // "2 replicas on cpu:0, cpu:1" (checkpoint metadata, logs).
  std::string topology() const;

  // Stores for a run; `creator` makes each variable (e.g. restoring it from a checkpoint),
  // called once per replica for mirrored variables, each time with that replica's device as
  // the default device, so that every copy starts from the same value (across workers, the
  // chief's). With parameter servers, the chief's values go to the ps tasks and the other
  // workers take them from there.
  std::unique_ptr<DistributedVariables> create_variables(
      uint64_t seed, nn::VariableCreator creator = nn::default_variable_creator) const;

  // Runs fn on every replica, each on its own thread with its device, its share of the
  // intra-op threads, its variable store and `generators[r]` (when given) current. Returns
  // each replica's result. An exception on one replica is rethrown here, after the others
  // have been released from any collective they wait in.
  template <typename R>
  PerReplica<R> run(DistributedVariables& variables, const std::function<R(ReplicaContext&)>& fn,
                    std::vector<Generator>* generators = nullptr) const {
    PerReplica<R> results(devices().size());
    run_replicas(
        variables, [&](ReplicaContext& ctx) { results[ctx.replica_id()] = fn(ctx); }, generators);
    return results;
  }
  void run_replicas(DistributedVariables& variables, const std::function<void(ReplicaContext&)>& fn,
                    std::vector<Generator>* generators = nullptr) const;

  // The replicas' values combined: summed, or averaged (weighted by `weights`, default
  // equal), on the first device. Dense tensors of one shape. Under MultiWorkerMirrored it
  // combines the replicas of every worker (collective: each worker calls it alike, in the
  // same order), as tf.distribute does.
  Tensor reduce(ReduceOp op, const PerReplica<Tensor>& values,
                const std::vector<double>& weights = {}) const;
  // The replicas' values concatenated along `axis`, on the first device; under
  // MultiWorkerMirrored those of every worker, in worker order (collective; the workers'
  // values may differ in length along `axis` only).
  Tensor gather(const PerReplica<Tensor>& values, int axis = 0) const;

  // What input_fn learns: one pipeline per worker (this one's index among them), and
  // num_replicas_in_sync replicas.
  io::InputContext input_context() const;
  // Global batches split over the replicas of every worker: each worker reads the whole
  // dataset and keeps its replicas' rows of each batch.
  DistributedDataset distribute_dataset(const io::Dataset& dataset) const;
  // input_fn(input_context()) produces per-replica batches; replicas take turns. With
  // several workers the pipeline is auto-sharded (io/auto_shard.h) by the policy in its
  // options, so that each worker reads a disjoint part of the input; the plan is logged.
  DistributedDataset distribute_datasets_from_function(const InputFn& input_fn) const;
  // The same input read as `input_shards` virtual shards (io/virtual_shards.h), of which
  // this worker owns a contiguous range: input_fn is called once, with an InputContext of
  // input_shards pipelines and as many replicas (so per_replica_batch_size gives a shard's
  // share of the global batch), and each step joins one batch of every owned shard, split
  // over the local replicas. Every worker steps with the others, so the shards advance
  // together. With `part_rows` (one replica per worker) each step's element also says how
  // many rows each shard gave (io/virtual_shards.h, kShardRowsFeature), for a reduction in
  // shard order. Throws InvalidArgumentError when the workers outnumber the shards or the
  // strategy's workers step on their own.
  DistributedDataset distribute_datasets_from_function(const InputFn& input_fn,
                                                       int64_t input_shards,
                                                       bool part_rows = false) const;

  // The hooks that the framework drives (strategies/strategy_extended.h, not installed).
  const StrategyExtended& extended() const;

 protected:
  explicit Strategy(std::unique_ptr<StrategyExtended> extended);

 private:
  std::unique_ptr<StrategyExtended> extended_;
  mutable Mutex threads_mutex_;
  mutable std::unique_ptr<ReplicaThreads> threads_
      CADRE_GUARDED_BY(threads_mutex_);  // made on first run
};

// Devices from text ("cpu:0,cpu:1", "gpu:0"); empty text: every GPU, else cpu:0. Throws
// InvalidArgumentError naming the bad entry and listing the available devices.
std::vector<Device> parse_devices(const std::string& text);

}  // namespace cadre
