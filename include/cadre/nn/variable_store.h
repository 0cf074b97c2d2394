// The variables of a model, found by name.
//
// Layers ask the calling thread's current store (entered with a VariableStoreScope) for
// their variables by name, under the thread's name scopes: the first call creates a
// variable, later calls (every later step) return the same one. Creation goes through a
// VariableCreator, which distribution strategies replace to make their kind of variable
// (mirrored copies, one central copy, parameter-server handles), as TensorFlow's variable
// creator scopes do.
//
// A VariableStore is safe for concurrent use from several threads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/nn/variable.h"

namespace cadre::nn {

class Metric;

// Makes the variable for `spec`; `seed` is the store's seed for initializers.
using VariableCreator =
    std::function<std::shared_ptr<Variable>(const VariableSpec& spec, uint64_t seed)>;

// Initialises spec.initializer with a generator of (seed, stream_for_name(spec.name)) on
// the calling thread's default device.
std::shared_ptr<Variable> default_variable_creator(const VariableSpec& spec, uint64_t seed);

class VariableStore {
 public:
  explicit VariableStore(uint64_t seed = 0, VariableCreator creator = default_variable_creator);
  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  // The variable named spec.name, created through the creator the first time. Throws
  // InvalidArgumentError when a variable of that name exists with another shape or dtype.
  Variable& get_or_create(const VariableSpec& spec);
  // Adds a variable made elsewhere (e.g. restored); throws AlreadyExistsError on a clash.
  Variable& add(std::shared_ptr<Variable> variable);
  Variable* find(std::string_view name) const;
  // In creation order.
  std::vector<Variable*> variables() const;
  std::vector<Variable*> trainable_variables() const;

  // The metric named `name`, made by `make` the first time (metrics accumulate across the
  // steps of an evaluation). Metrics are not variables: checkpoints do not hold them.
  std::shared_ptr<Metric> metric(const std::string& name,
                                 const std::function<std::shared_ptr<Metric>()>& make);
  std::vector<std::pair<std::string, std::shared_ptr<Metric>>> metrics() const;

  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  mutable Mutex mutex_;
  VariableCreator creator_ CADRE_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<Variable>> ordered_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, Variable*, std::less<>> by_name_ CADRE_GUARDED_BY(mutex_);
  std::vector<std::pair<std::string, std::shared_ptr<Metric>>> metrics_ CADRE_GUARDED_BY(mutex_);
};

// The calling thread's store; throws FailedPreconditionError when no VariableStoreScope
// is active on this thread.
VariableStore& current_store();

class VariableStoreScope {
 public:
  explicit VariableStoreScope(VariableStore& store);
  ~VariableStoreScope();
  VariableStoreScope(const VariableStoreScope&) = delete;
  VariableStoreScope& operator=(const VariableStoreScope&) = delete;

 private:
  VariableStore* previous_;
};

// Prefixes names of variables created on this thread in its lifetime: "block1/".
class NameScope {
 public:
  explicit NameScope(std::string_view name);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;
};

// `name` under the thread's current name scopes: "outer/inner/name".
std::string scoped_name(std::string_view name);

// The variable `name` (scoped) in the current store, created with `initializer` the
// first time: what layers use.
Variable& get_variable(std::string_view name, const Shape& shape, const Initializer& initializer,
                       DType dtype = DType::kFloat32, bool trainable = true);

}  // namespace cadre::nn
