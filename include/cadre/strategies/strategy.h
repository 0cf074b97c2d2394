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
// A Strategy is immutable after creation and may serve several runs one after another; one
// run() at a time.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/io/dataset.h"
#include "cadre/io/input_context.h"
#include "cadre/nn/optimizer.h"
#include "cadre/nn/variable_store.h"
#include "cadre/random/generator.h"
#include "cadre/strategies/cross_device_ops.h"
#include "core/tensor/transfer.h"

namespace cadre {

class Strategy;
class ReplicaGroup;
class ReplicaThreads;

// The variables of a run under a strategy: one store per replica holding identical copies
// (mirrored), or one store that every replica shares (central storage, one device).
class DistributedVariables {
 public:
  DistributedVariables(std::vector<std::unique_ptr<nn::VariableStore>> stores, int replicas);
  virtual ~DistributedVariables() = default;
  // Replica r's view.
  nn::VariableStore& store(int replica);
  // The logical variables, as checkpoints hold them (replica 0's copies).
  nn::VariableStore& primary() { return *stores_[0]; }
  bool mirrored() const { return stores_.size() > 1; }

 private:
  std::vector<std::unique_ptr<nn::VariableStore>> stores_;
  int replicas_;
};

// What a replica's function sees: which replica it is, and the collectives it shares with
// the other replicas of the step. Every replica must make the same sequence of collective
// calls (all_reduce, apply_gradients, barrier), as with tf.distribute's replica context.
class ReplicaContext {
 public:
  ReplicaContext(const Strategy& strategy, ReplicaGroup& group, DistributedVariables& variables,
                 int replica_id);
  int replica_id() const { return replica_id_; }
  int num_replicas_in_sync() const;
  Device device() const;
  nn::VariableStore& store() { return variables_.store(replica_id_); }
  // The trainable variables of this replica's store, and their tensors (what to take the
  // gradient with respect to), in creation order.
  std::vector<nn::Variable*> trainable_variables() { return store().trainable_variables(); }
  std::vector<Tensor> trainable_sources();

  // Collective: reduces each replica's values (see CrossDeviceOps::batch_reduce; `weight`
  // is this replica's share, usually its batch size) and returns the result on this
  // replica's device, identical on every replica.
  std::vector<Gradient> all_reduce(ReduceOp op, std::vector<Gradient> values, double weight = 1);
  Tensor all_reduce(ReduceOp op, const Tensor& value, double weight = 1);
  // Collective: averages the gradients over the replicas (weighted by `weight`) and applies
  // one identical update: to every copy of mirrored variables, or once to shared ones.
  void apply_gradients(nn::Optimizer& optimizer, std::vector<Gradient> gradients, double weight = 1,
                       std::vector<nn::Variable*> variables = {});
  // Collective: returns when every replica has reached it.
  void barrier();

 private:
  const Strategy& strategy_;
  ReplicaGroup& group_;
  DistributedVariables& variables_;
  int replica_id_;
};

// Per-replica elements of a distributed dataset: element r feeds replica r.
// How a worker's replicas take their share of each global batch: this worker's replicas
// are replicas [first, first + devices) of `total` in the job.
struct BatchSplit {
  int first = 0;
  int total = 1;
};

class DistributedIterator {
 public:
  // Element r is delivered on devices[r]. With split_batches, each element is a global
  // batch that `split` divides over the job's replicas.
  DistributedIterator(io::Iterator iterator, std::vector<Device> devices, bool split_batches,
                      BatchSplit split = {});
  // The next step's inputs, or nullopt at the end of the data. Splitting a global batch of
  // B examples over N replicas (of every worker) gives the first B % N replicas one example
  // more than the others (their weights in apply_gradients keep the average exact); a batch
  // smaller than N is an InvalidArgumentError. From a function, each replica takes the next
  // element; a step that cannot be filled ends the data.
  std::optional<PerReplica<io::Element>> next();
  io::IteratorState save() { return iterator_.save(); }
  void restore(const io::IteratorState& state) { iterator_.restore(state); }

 private:
  io::Iterator iterator_;
  std::vector<Device> devices_;
  bool split_;
  BatchSplit batch_split_;
  std::vector<Transfer> transfers_;  // copies to GPUs of the last step's inputs
};

class DistributedDataset {
 public:
  DistributedDataset(io::Dataset dataset, std::vector<Device> devices, bool split_batches,
                     BatchSplit split = {})
      : dataset_(std::move(dataset)),
        devices_(std::move(devices)),
        split_(split_batches),
        batch_split_(split) {}
  DistributedIterator make_iterator() const;

 private:
  io::Dataset dataset_;
  std::vector<Device> devices_;
  bool split_;
  BatchSplit batch_split_;
};

using InputFn = std::function<io::Dataset(const io::InputContext& context)>;

class Strategy {
 public:
  virtual ~Strategy();
  // "one_device", "mirrored", "central_storage".
  virtual std::string name() const = 0;
  // The devices of this process that replicas compute on, one replica each.
  const std::vector<Device>& devices() const { return devices_; }
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  // Processes (workers) training together, and this one's index among them.
  virtual int num_workers() const { return 1; }
  virtual int worker_index() const { return 0; }
  // Workers whose replicas step together, reducing their gradients: every worker for the
  // collective strategies, 1 with parameter servers (each worker steps on its own).
  virtual int num_workers_in_sync() const { return num_workers(); }
  // Replicas that share one global batch: the local ones of every worker in sync.
  int num_replicas_in_sync() const { return num_local_replicas() * num_workers_in_sync(); }
  // Across workers, in place: sums each value over the workers, and `weight` too (every
  // worker calls it with the same values in the same order; collective). Nothing to do for a
  // single worker.
  virtual void cross_worker_sum(std::vector<Gradient>& values, double& weight) const {}
  // The chief's `value` on every worker (collective), e.g. the step a run starts at.
  virtual int64_t broadcast_from_chief(int64_t value) const { return value; }
  // Where replica r's copy of the variables lives.
  virtual Device variable_device(int replica) const = 0;
  // Whether each replica holds its own copy of the variables.
  virtual bool mirrors_variables() const = 0;
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }
  // "2 replicas on cpu:0, cpu:1" (checkpoint metadata, logs).
  std::string topology() const;

  // Stores for a run; `creator` makes each variable (e.g. restoring it from a checkpoint),
  // called once per replica for mirrored variables, each time with that replica's device as
  // the default device, so that every copy starts from the same value (across workers, the
  // chief's: see copy_creators).
  virtual std::unique_ptr<DistributedVariables> create_variables(
      uint64_t seed, nn::VariableCreator creator = nn::default_variable_creator) const;

  // The parts of a training step that depend on where variables live. run() calls
  // before_run first (parameter servers: pull the variables); apply_gradients ends in
  // update_shared for variables the replicas share (one call, on replica 0, after the
  // reduction; by default the optimizer updates them here); global_step_after gives the
  // step reached after a step taken at `step` (here step + 1); variables_to_save gives the
  // logical variables for a checkpoint (whole tensors, slots included; here the primary
  // store).
  virtual void before_run(DistributedVariables& variables) const {}
  virtual void update_shared(DistributedVariables& variables, nn::Optimizer& optimizer,
                             std::vector<Gradient> gradients,
                             const std::vector<nn::Variable*>& targets) const;
  virtual int64_t global_step_after(DistributedVariables& variables, int64_t step) const {
    return step + 1;
  }
  virtual std::shared_ptr<const nn::VariableStore> variables_to_save(
      DistributedVariables& variables) const;

  // Runs fn on every replica, each on its own thread with its device, its share of the
  // intra-op threads, its variable store and `generators[r]` (when given) current. Returns
  // each replica's result. An exception on one replica is rethrown here, after the others
  // have been released from any collective they wait in.
  template <typename R>
  PerReplica<R> run(DistributedVariables& variables, const std::function<R(ReplicaContext&)>& fn,
                    std::vector<Generator>* generators = nullptr) const {
    PerReplica<R> results(devices_.size());
    run_replicas(
        variables, [&](ReplicaContext& ctx) { results[ctx.replica_id()] = fn(ctx); }, generators);
    return results;
  }
  void run_replicas(DistributedVariables& variables, const std::function<void(ReplicaContext&)>& fn,
                    std::vector<Generator>* generators = nullptr) const;

  // The replicas' values combined: summed, or averaged (weighted by `weights`, default
  // equal), on the first device. Dense tensors of one shape.
  Tensor reduce(ReduceOp op, const PerReplica<Tensor>& values,
                const std::vector<double>& weights = {}) const;
  // The replicas' values concatenated along `axis`, on the first device.
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

 protected:
  // Throws InvalidArgumentError listing the available devices for an unknown device, one
  // named twice, or none.
  Strategy(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> cross_device_ops);
  // The creator of each of `copies` stores of one create_variables call, given the caller's.
  virtual std::vector<nn::VariableCreator> copy_creators(nn::VariableCreator creator,
                                                         int copies) const {
    return std::vector<nn::VariableCreator>(static_cast<size_t>(copies), creator);
  }

 private:
  std::vector<Device> devices_;
  std::shared_ptr<CrossDeviceOps> cross_device_ops_;
  mutable std::mutex threads_mutex_;
  mutable std::unique_ptr<ReplicaThreads>
      threads_;  // GUARDED_BY(threads_mutex_), made on first run
};

// Devices from text ("cpu:0,cpu:1", "gpu:0"); empty text: every GPU, else cpu:0. Throws
// InvalidArgumentError naming the bad entry and listing the available devices.
std::vector<Device> parse_devices(const std::string& text);

}  // namespace cadre
