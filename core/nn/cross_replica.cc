#include "cadre/nn/cross_replica.h"

#include "cadre/autodiff/tape.h"

namespace cadre::nn {

namespace {
thread_local ReplicaCollective* current = nullptr;
}  // namespace

ReplicaCollective* current_replica_collective() { return current; }

bool updates_variables_here() { return current == nullptr || current->updates_variables(); }

ReplicaCollectiveScope::ReplicaCollectiveScope(ReplicaCollective* collective) : previous_(current) {
  current = collective;
}

ReplicaCollectiveScope::~ReplicaCollectiveScope() { current = previous_; }

Tensor cross_replica_sum(const Tensor& x) {
  ReplicaCollective* collective = current;
  if (collective == nullptr || collective->num_replicas() == 1) return x;
  Tensor y;
  {
    NoGradScope no_grad;
    y = collective->sum(x);
  }
  if (autodiff::should_record({&x})) {
    autodiff::record("cross_replica_sum", {x}, {y},
                     [collective](const autodiff::BackwardContext& c) {
                       NoGradScope no_grad;
                       return std::vector<Gradient>{collective->sum(c.grad())};
                     });
  }
  return y;
}

}  // namespace cadre::nn
