// How model code reaches the other replicas of a step: strategies run each replica with a
// ReplicaCollective current on its thread, and layers that need the global batch
// (synchronized batch normalization) sum across replicas through it. core knows nothing of
// strategies; this is the seam they plug into.
#pragma once

#include "cadre/tensor/tensor.h"

namespace cadre::nn {

class ReplicaCollective {
 public:
  virtual ~ReplicaCollective() = default;
  virtual int num_replicas() const = 0;
  // The sum of `x` over all replicas, on this replica's device. Collective: every replica
  // calls it, in the same order, with the same shape.
  virtual Tensor sum(const Tensor& x) = 0;
  // Whether this replica writes the variables that layers update themselves (batch norm's
  // moving statistics): every replica its own copy when variables are mirrored, one replica
  // when they are shared, so that a step updates them once.
  virtual bool updates_variables() const = 0;
};

// The calling thread's collective, or null outside a multi-replica step.
ReplicaCollective* current_replica_collective();
// False on the replicas of a step that must leave shared variables to another replica.
bool updates_variables_here();

class ReplicaCollectiveScope {
 public:
  explicit ReplicaCollectiveScope(ReplicaCollective* collective);
  ~ReplicaCollectiveScope();
  ReplicaCollectiveScope(const ReplicaCollectiveScope&) = delete;
  ReplicaCollectiveScope& operator=(const ReplicaCollectiveScope&) = delete;

 private:
  ReplicaCollective* previous_;
};

// The sum of x over the replicas (x itself outside a multi-replica step). Differentiable:
// every replica's loss depends on every replica's x, so the gradient of x is the sum of
// the replicas' incoming gradients (a collective in the backward pass too).
Tensor cross_replica_sum(const Tensor& x);

}  // namespace cadre::nn
