// A named, mutable tensor that persists across training steps: a model's weights, an
// optimizer's slots, a layer's moving statistics.
#pragma once

#include <memory>
#include <string>

#include "cadre/nn/initializers.h"
#include "cadre/tensor/tensor.h"

namespace cadre::nn {

// How a distribution strategy combines per-replica writes (TensorFlow's
// VariableAggregation), and when copies are synchronised (VariableSynchronization).
enum class Aggregation { kNone, kSum, kMean, kOnlyFirstReplica };
enum class Synchronization { kAuto, kOnWrite, kOnRead };

// What a variable creator needs to make a variable.
struct VariableSpec {
  std::string name{};  // full name, name scopes applied: "hidden1/kernel"
  Shape shape{};
  DType dtype = DType::kFloat32;
  Initializer initializer{};
  bool trainable = true;
  Aggregation aggregation = Aggregation::kNone;
  Synchronization synchronization = Synchronization::kAuto;
  // The variable this one is a slot of (an optimizer's "m" of "hidden1/kernel"), else empty.
  std::string slot_of{};
  // Read by row lookups (an embedding table): where the variable lives elsewhere (parameter
  // servers), a step fetches only the rows it looks up.
  bool row_access = false;
};

// Where a variable's value lives when it is not here (on parameter servers): the variable's
// tensor is then a local copy that reads bring up to date through this source. Thread-safe.
class RemoteSource {
 public:
  virtual ~RemoteSource() = default;
  // Brings all of `local` up to date (writing into its buffer).
  virtual void fetch(Tensor local) = 0;
  // Brings rows `ids` (int32/int64, any shape; axis 0 of the variable) of `local` up to date.
  virtual void fetch_rows(Tensor local, const Tensor& ids) = 0;
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
  // Like read(), for lookups of rows `ids` along axis 0: of a remote variable only those
  // rows are brought up to date (the others may be stale).
  Tensor read_rows(const Tensor& ids) const;
  // The value without watching (optimizers, checkpoints, metrics). Before writing into its
  // buffer, call finish_deferred_copies() (below): a checkpoint may still be copying it.
  Tensor& tensor() { return value_; }
  const Tensor& tensor() const { return value_; }
  // Copies `value` in (same shape; converted to this variable's dtype and device).
  void assign(const Tensor& value);

  // Makes this variable a local copy of a remote one: reads fetch through `source`.
  void set_remote(std::shared_ptr<RemoteSource> source) { remote_ = std::move(source); }

 private:
  Tensor watched() const;

  VariableSpec spec_;
  Tensor value_;
  std::shared_ptr<RemoteSource> remote_;
};

// Finishes the copies that asynchronous checkpoints still take of variables (their values
// at the moment of the save), on the calling thread if need be. Call it before writing into
// a variable's buffer in place (Variable::tensor()), as assign() and the optimizers do. One
// atomic load when no copy is pending. Thread-safe. A copy that fails fails its checkpoint,
// not the caller.
void finish_deferred_copies();

}  // namespace cadre::nn
