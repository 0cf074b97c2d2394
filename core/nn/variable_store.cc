#include "cadre/nn/variable_store.h"

#include <cctype>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/metrics.h"
#include "core/base/strings.h"

namespace cadre::nn {
namespace {

thread_local VariableStore* current = nullptr;
thread_local std::vector<std::string> scopes;

void check_name(std::string_view name) {
  bool ok = !name.empty() && name.front() != '/' && name.back() != '/';
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '-' ||
                c == '.');
  }
  if (!ok) {
    throw InvalidArgumentError(str_cat("invalid variable name '", name,
                                       "': use letters, digits and _ - . with / between scopes"));
  }
}

}  // namespace

std::shared_ptr<Variable> default_variable_creator(const VariableSpec& spec, uint64_t seed) {
  Generator generator(seed, stream_for_name(spec.name));
  Tensor value;
  {
    NoGradScope no_grad;
    value = spec.initializer ? spec.initializer(spec.shape, spec.dtype, generator)
                             : Tensor::zeros(spec.shape, spec.dtype);
  }
  if (value.shape() != spec.shape || value.dtype() != spec.dtype) {
    throw InvalidArgumentError(str_cat("the initializer of variable '", spec.name, "' returned ",
                                       value.dtype(), " ", value.shape(), "; expected ", spec.dtype,
                                       " ", spec.shape));
  }
  if (!value.is_contiguous() || value.device() != default_device()) {
    value = value.to(default_device()).clone();
  }
  return std::make_shared<Variable>(spec, value);
}

VariableStore::VariableStore(uint64_t seed, VariableCreator creator)
    : seed_(seed), creator_(std::move(creator)) {}

Variable& VariableStore::get_or_create(const VariableSpec& spec) {
  MutexLock lock(mutex_);
  auto it = by_name_.find(spec.name);
  if (it != by_name_.end()) {
    Variable& existing = *it->second;
    if (existing.shape() != spec.shape || existing.dtype() != spec.dtype) {
      throw InvalidArgumentError(
          str_cat("variable '", spec.name, "' already exists as ", existing.dtype(), " ",
                  existing.shape(), "; it was asked for again as ", spec.dtype, " ", spec.shape));
    }
    return existing;
  }
  check_name(spec.name);
  VariableCreator creator = creator_;
  lock.unlock();  // initialisation may be slow; creators may call back into the store
  std::shared_ptr<Variable> made = creator(spec, seed_);
  lock.lock();
  auto again = by_name_.find(spec.name);
  if (again != by_name_.end()) return *again->second;  // another thread made it meanwhile
  ordered_.push_back(made);
  by_name_.emplace(spec.name, made.get());
  return *made;
}

Variable& VariableStore::add(std::shared_ptr<Variable> variable) {
  MutexLock lock(mutex_);
  check_name(variable->name());
  if (by_name_.count(variable->name()) != 0) {
    throw AlreadyExistsError(str_cat("variable '", variable->name(), "' already exists"));
  }
  by_name_.emplace(variable->name(), variable.get());
  ordered_.push_back(std::move(variable));
  return *ordered_.back();
}

Variable* VariableStore::find(std::string_view name) const {
  MutexLock lock(mutex_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Variable*> VariableStore::variables() const {
  MutexLock lock(mutex_);
  std::vector<Variable*> out;
  for (const auto& v : ordered_) out.push_back(v.get());
  return out;
}

std::vector<Variable*> VariableStore::trainable_variables() const {
  MutexLock lock(mutex_);
  std::vector<Variable*> out;
  for (const auto& v : ordered_) {
    if (v->trainable()) out.push_back(v.get());
  }
  return out;
}

std::shared_ptr<Metric> VariableStore::metric(
    const std::string& name, const std::function<std::shared_ptr<Metric>()>& make) {
  MutexLock lock(mutex_);
  for (const auto& [n, m] : metrics_) {
    if (n == name) return m;
  }
  metrics_.emplace_back(name, make());
  return metrics_.back().second;
}

std::vector<std::pair<std::string, std::shared_ptr<Metric>>> VariableStore::metrics() const {
  MutexLock lock(mutex_);
  return metrics_;
}

VariableStore& current_store() {
  if (current == nullptr) {
    throw FailedPreconditionError(
        "no VariableStore is active on this thread: layers find their variables in the "
        "store of the innermost VariableStoreScope (the Estimator and strategies set one up "
        "for model_fn)");
  }
  return *current;
}

VariableStoreScope::VariableStoreScope(VariableStore& store) : previous_(current) {
  current = &store;
}
VariableStoreScope::~VariableStoreScope() { current = previous_; }

NameScope::NameScope(std::string_view name) { scopes.emplace_back(name); }
NameScope::~NameScope() { scopes.pop_back(); }

std::string scoped_name(std::string_view name) {
  std::string full;
  for (const std::string& s : scopes) {
    full += s;
    full += '/';
  }
  full += name;
  return full;
}

Variable& get_variable(std::string_view name, const Shape& shape, const Initializer& initializer,
                       DType dtype, bool trainable) {
  VariableSpec spec;
  spec.name = scoped_name(name);
  spec.shape = shape;
  spec.dtype = dtype;
  spec.initializer = initializer;
  spec.trainable = trainable;
  return current_store().get_or_create(spec);
}

}  // namespace cadre::nn
