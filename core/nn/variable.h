// A named, mutable tensor that persists across training steps: a model's weights, an
// optimizer's slots, a layer's moving statistics.
#pragma once

#include <memory>
#include <string>

#include "core/nn/initializers.h"
#include "core/tensor/tensor.h"

namespace cadre::nn {

// How a distribution strategy combines per-replica writes (TensorFlow's
// VariableAggregation), and when copies are synchronised (VariableSynchronization).
enum class Aggregation { kNone, kSum, kMean, kOnlyFirstReplica };
enum class Synchronization { kAuto, kOnWrite, kOnRead };

// What a variable creator needs to make a variable.
struct VariableSpec {
  std::string name;  // full name, name scopes applied: "hidden1/kernel"
  Shape shape;
  DType dtype = DType::kFloat32;
  Initializer initializer;
  bool trainable = true;
  Aggregation aggregation = Aggregation::kNone;
  Synchronization synchronization = Synchronization::kAuto;
  // The variable this one is a slot of (an optimizer's "m" of "hidden1/kernel"), else empty.
  std::string slot_of;
};

// Not synchronised: a variable is read and written by the replica thread that owns it
// (strategies give each replica its own copy).
class Variable {
 public:
  Variable(VariableSpec spec, Tensor value);

  const std::string& name() const { return spec_.name; }
  const VariableSpec& spec() const { return spec_; }
  bool trainable() const { return spec_.trainable; }
  const Shape& shape() const { return value_.shape(); }
  DType dtype() const { return value_.dtype(); }
  Device device() const { return value_.device(); }

  // The value for use in computation, on the calling thread's default device (a copy when
  // the variable lives elsewhere, as replicas read a central variable). A trainable variable
  // read while a GradientTape is recording on this thread is watched by it, so its gradient
  // (on the variable's own device) can be taken.
  Tensor read() const;
  // The value without watching (optimizers, checkpoints, metrics).
  Tensor& tensor() { return value_; }
  const Tensor& tensor() const { return value_; }
  // Copies `value` in (same shape; converted to this variable's dtype and device).
  void assign(const Tensor& value);

 private:
  VariableSpec spec_;
  Tensor value_;
};

}  // namespace cadre::nn
