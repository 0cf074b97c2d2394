// What a replica's function sees inside Strategy::run: which replica it is, its variables,
// and the collectives it shares with the other replicas of the step (tf.distribute's
// ReplicaContext).
#pragma once

#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/nn/optimizer.h"
#include "cadre/nn/variable_store.h"
#include "cadre/strategies/distributed_variables.h"
#include "cadre/strategies/per_replica.h"
#include "cadre/tensor/device.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

class GradientTape;
class ReplicaGroup;
class StrategyExtended;

// Made by Strategy::run for each replica, valid during the call. Every replica must make
// the same sequence of collective calls (all_reduce, apply_gradients, barrier).
class ReplicaContext {
 public:
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
  // `means`, when given, are scalars averaged alike over every replica of the job and
  // replaced by the result (a step's loss and summaries, so that they describe the global
  // batch: they ride in the gradients' reduction, at no extra collective). A replica of
  // weight 0 (no examples: its worker's input has ended while others' have not) adds zeros
  // whatever its gradients hold. Returns false, having applied nothing, when every replica
  // of the job had weight 0.
  bool apply_gradients(nn::Optimizer& optimizer, std::vector<Gradient> gradients, double weight = 1,
                       std::vector<nn::Variable*> variables = {},
                       std::vector<double>* means = nullptr);
  // Collective: the gradients of `loss` on `tape` with respect to `variables` (default: the
  // trainable ones), averaged and applied as apply_gradients() does, `means` too. Where the
  // strategy can (MultiWorkerMirrored, one replica per worker), they are summed across the
  // workers while the backward pass still runs. Returns what apply_gradients() returns.
  bool minimize(GradientTape& tape, const Tensor& loss, nn::Optimizer& optimizer, double weight = 1,
                std::vector<nn::Variable*> variables = {}, std::vector<double>* means = nullptr);
  // Collective, for a deterministic step: `parts` are this replica's gradient sums, one per
  // input shard it read (shards first_shard, first_shard + 1, ... of `shards`), each over
  // `rows[i]` examples, with scalar sums alike in `scalar_sums[i]` (a loss times its rows).
  // The shards' sums are added along one binary tree over the shards, whatever worker holds
  // them, so that the update (the mean over all the rows, applied as apply_gradients does)
  // is the same bits for any number of workers. `means` receives the scalars' means. One
  // replica per worker.
  void apply_shard_gradients(nn::Optimizer& optimizer, int64_t first_shard, int64_t shards,
                             std::vector<std::vector<Gradient>> parts,
                             const std::vector<int64_t>& rows,
                             const std::vector<std::vector<double>>& scalar_sums,
                             const std::vector<nn::Variable*>& variables,
                             std::vector<double>* means);
  // Collective: returns when every replica has reached it.
  void barrier();

 private:
  friend class Strategy;
  ReplicaContext(const StrategyExtended& extended, ReplicaGroup& group,
                 DistributedVariables& variables, int replica_id);
  // The update with gradients every replica holds alike: to each copy of mirrored
  // variables, or once (by replica 0) to shared ones.
  void apply_reduced(nn::Optimizer& optimizer, std::vector<Gradient> reduced,
                     const std::vector<nn::Variable*>& variables);
  // all_reduce(), also giving the sum of every replica's weight across the job.
  std::vector<Gradient> all_reduce(ReduceOp op, std::vector<Gradient> values, double weight,
                                   double& job_weight);

  const StrategyExtended& extended_;
  ReplicaGroup& group_;
  DistributedVariables& variables_;
  int replica_id_;
};

}  // namespace cadre
