#include "cadre/strategies/replica_context.h"

#include <algorithm>

#include "cadre/autodiff/tape.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/runtime/profiler.h"
#include "core/kernels/elementwise.h"
#include "core/tensor/views.h"
#include "strategies/replica_group.h"
#include "strategies/strategy_extended.h"

namespace cadre {

namespace {

// Each value times `weight`: what a lone replica contributes to a weighted sum.
void scale(std::vector<Gradient>& values, double weight) {
  NoGradScope no_grad;
  for (Gradient& g : values) {
    if (!g.defined()) continue;
    if (g.is_sparse()) {
      IndexedSlices s = g.sparse();
      s.values = s.values * weight;
      g = s;
    } else {
      g = g.dense() * weight;
    }
  }
}

// g times `scale` on `device`, sparse or dense as it came.
Gradient scaled_to(const Gradient& g, double scale, Device device) {
  if (g.is_sparse()) {
    const IndexedSlices& s = g.sparse();
    Tensor values = to_device(s.values, device);
    return IndexedSlices{to_device(s.indices, device), scale == 1.0 ? values : values * scale,
                         s.dense_shape};
  }
  Tensor t = to_device(g.dense(), device);
  return scale == 1.0 ? t : t * scale;
}

// What a replica without examples adds: zeros of its gradients' shapes and kinds, so that
// every worker's reduction has the same layout. Over no rows a gradient can hold NaN (a mean
// over nothing), and NaN times a weight of 0 is NaN.
Gradient nothing_like(const Gradient& g) {
  if (!g.defined()) return g;
  if (g.is_sparse()) {
    const IndexedSlices& s = g.sparse();
    std::vector<int64_t> row = s.values.shape().to_vector();
    row[0] = 0;
    return IndexedSlices{Tensor::empty(Shape{0}, s.indices.dtype(), s.indices.device()),
                         Tensor::empty(Shape(row), s.values.dtype(), s.values.device()),
                         s.dense_shape};
  }
  return Tensor::zeros(g.shape(), g.dtype(), g.device());
}

}  // namespace

ReplicaContext::ReplicaContext(const StrategyExtended& extended, ReplicaGroup& group,
                               DistributedVariables& variables, int replica_id)
    : extended_(extended), group_(group), variables_(variables), replica_id_(replica_id) {}

int ReplicaContext::num_replicas_in_sync() const { return extended_.num_replicas_in_sync(); }
Device ReplicaContext::device() const { return extended_.devices()[replica_id_]; }

std::vector<Tensor> ReplicaContext::trainable_sources() {
  std::vector<Tensor> sources;
  for (nn::Variable* v : trainable_variables()) sources.push_back(v->tensor());
  return sources;
}

std::vector<Gradient> ReplicaContext::all_reduce(ReduceOp op, std::vector<Gradient> values,
                                                 double weight) {
  double total = 0;
  return all_reduce(op, std::move(values), weight, total);
}

std::vector<Gradient> ReplicaContext::all_reduce(ReduceOp op, std::vector<Gradient> values,
                                                 double weight, double& job_weight) {
  job_weight = weight;
  const bool across_workers = extended_.num_workers_in_sync() > 1;
  if (group_.size() == 1 && !across_workers) {
    if (op == ReduceOp::kSum && weight != 1) scale(values, weight);
    return values;
  }
  group_.inputs[replica_id_] = std::move(values);
  group_.weights[replica_id_] = weight;
  group_.arrive_and_wait([&] {
    group_.total_weight = 0;
    for (double w : group_.weights) group_.total_weight += w;
    std::vector<Device> destinations;
    for (int r = 0; r < group_.size(); ++r) destinations.push_back(extended_.variable_device(r));
    if (!across_workers) {
      group_.outputs = extended_.cross_device_ops().batch_reduce(op, group_.inputs, group_.weights,
                                                                 destinations);
      return;
    }
    // Within the worker first (the weighted sum on replica 0's device), then across workers,
    // then the mean over every example of the job.
    std::vector<Device> here(destinations.size(), destinations[0]);
    std::vector<Gradient> sum = extended_.cross_device_ops().batch_reduce(
        ReduceOp::kSum, group_.inputs, group_.weights, here)[0];
    extended_.cross_worker_sum(sum, group_.total_weight);
    NoGradScope no_grad;
    // No replica of the job had examples (every worker's input has ended): nothing to mean.
    const double total = group_.total_weight;
    const double scale = op == ReduceOp::kMean && total != 0 ? 1.0 / total : 1.0;
    for (int r = 0; r < group_.size(); ++r) {
      std::vector<Gradient> mine;
      for (const Gradient& g : sum) {
        mine.push_back(g.defined() ? scaled_to(g, scale, destinations[r]) : Gradient());
      }
      group_.outputs[r] = std::move(mine);
    }
  });
  // Read before this replica's next collective, which the group's last arrival could begin
  // rewriting only once this one has arrived at it.
  job_weight = group_.total_weight;
  return group_.outputs[replica_id_];
}

Tensor ReplicaContext::all_reduce(ReduceOp op, const Tensor& value, double weight) {
  return all_reduce(op, std::vector<Gradient>{value}, weight)[0].dense();
}

bool ReplicaContext::minimize(GradientTape& tape, const Tensor& loss, nn::Optimizer& optimizer,
                              double weight, std::vector<nn::Variable*> variables,
                              std::vector<double>* means) {
  if (variables.empty()) variables = trainable_variables();
  std::vector<Tensor> sources;
  for (nn::Variable* v : variables) sources.push_back(v->tensor());
  if (!extended_.overlaps_gradients() || group_.size() != 1) {
    std::vector<Gradient> gradients = tape.gradient(loss, sources);
    profiler::Scope update("update", profiler::kPhase);
    return apply_gradients(optimizer, std::move(gradients), weight, std::move(variables), means);
  }
  // Weighted sums across the workers, divided by the summed weight: the mean over every
  // example of the job, as all_reduce(kMean) gives.
  std::vector<double> scalars;
  if (means) {
    for (double m : *means) scalars.push_back(weight == 0 ? 0.0 : m * weight);
  }
  extended_.begin_gradients(sources, weight, scalars);
  tape.announce(loss, sources, [this, weight](size_t i, const Gradient& g) {
    extended_.gradient_ready(i, weight == 0 ? nothing_like(g) : g);
  });
  profiler::Scope update("update", profiler::kPhase);
  double total = weight;
  std::vector<Gradient> sums;
  {
    profiler::Scope scope("all_reduce", profiler::kPhase);
    sums = extended_.finish_gradients(total, scalars);
  }
  if (total == 0) {
    if (means) std::fill(means->begin(), means->end(), 0.0);
    return false;
  }
  if (means) {
    for (size_t i = 0; i < means->size(); ++i) (*means)[i] = scalars[i] / total;
  }
  {
    NoGradScope no_grad;
    for (Gradient& g : sums) {
      if (!g.defined()) continue;
      if (g.is_sparse() || g.dense().device() != device() || !device().is_cpu() ||
          !g.dense().is_contiguous()) {
        g = scaled_to(g, 1.0 / total, device());
      } else if (total != 1.0) {
        // In the buckets' host memory: a scaled copy would hold the gradients a second time
        // (on a GPU, as before: an in-place kernel there is untested).
        Tensor sum = g.dense();
        kernels::binary.call(sum.device(), kernels::BinaryOp::kMul, sum,
                             views::broadcast(scalar_like(sum, 1.0 / total), sum.shape(), "mul"),
                             sum);
      }
    }
  }
  apply_reduced(optimizer, std::move(sums), variables);
  return true;
}

void ReplicaContext::barrier() {
  if (group_.size() > 1) group_.arrive_and_wait([] {});
}

bool ReplicaContext::apply_gradients(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                                     double weight, std::vector<nn::Variable*> variables,
                                     std::vector<double>* means) {
  if (variables.empty()) variables = trainable_variables();
  const size_t count = gradients.size();
  if (weight == 0) {
    for (Gradient& g : gradients) g = nothing_like(g);
  }
  if (means) {
    // Float32, so that float32 gradients keep travelling as float32.
    for (double m : *means) {
      const float value = weight == 0 ? 0.0f : static_cast<float>(m);
      gradients.emplace_back(to_device(Tensor::scalar(value), device()));
    }
  }
  std::vector<Gradient> reduced;
  double total = weight;
  {
    profiler::Scope scope("all_reduce", profiler::kPhase);
    reduced = all_reduce(ReduceOp::kMean, std::move(gradients), weight, total);
  }
  if (total == 0) {
    if (means) std::fill(means->begin(), means->end(), 0.0);
    return false;
  }
  if (means) {
    for (size_t i = 0; i < means->size(); ++i) {
      (*means)[i] = reduced[count + i].dense().item<double>();
    }
    reduced.resize(count);
  }
  apply_reduced(optimizer, std::move(reduced), variables);
  return true;
}

void ReplicaContext::apply_reduced(nn::Optimizer& optimizer, std::vector<Gradient> reduced,
                                   const std::vector<nn::Variable*>& variables) {
  if (variables_.mirrored()) {
    // Identical gradients and identical copies: every replica makes the same update.
    optimizer.apply_gradients(std::move(reduced), variables);
    return;
  }
  // One shared copy: replica 0 updates it while the others wait, so that none reads it
  // half-updated in the next step.
  barrier();
  if (replica_id_ == 0)
    extended_.update_shared(variables_, optimizer, std::move(reduced), variables);
  barrier();
}

}  // namespace cadre
