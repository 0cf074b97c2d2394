#include "strategies/ps/shard.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "strategies/ps/fill_proto.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
Shard::Shard(std::string task, RowRestorer read_rows)
    : task_(std::move(task)), read_rows_(std::move(read_rows)), slots_(0) {}

template <typename Pred>
void Shard::wait_for(double timeout_seconds, Pred ready, const std::string& what) {
  if (timeout_seconds <= 0) timeout_seconds = 300;
  if (!changed_.wait_for(mutex_, std::chrono::duration<double>(timeout_seconds),
                         [&]() CADRE_REQUIRES(mutex_) { return ready() || stopping_; })) {
    throw DeadlineExceededError(
        str_cat(what, " within ", timeout_seconds, " s (is the chief running?)"));
  }
  if (stopping_) throw UnavailableError(str_cat(task_, " is shutting down"));
}

void Shard::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

// ---------------------------------------------------------------- variables

CreateResponse Shard::create(const CreateRequest& request) {
  const VariableDef& def = request.variable();
  std::string what = str_cat(task_, ": variable '", def.name(), "'");
  if (def.name().empty()) throw InvalidArgumentError(str_cat(task_, ": a variable without a name"));
  Tensor made;  // outside the lock: a slice takes a while to read or fill
  if (request.has_restore()) {
    made = read_restored(request.restore(), checked_dtype(def.dtype(), what),
                         checked_shape(def.shape(), what), what);
  } else if (request.has_fill()) {
    made = filled(request.fill(), checked_dtype(def.dtype(), what),
                  checked_shape(def.shape(), what), what);
  }
  MutexLock lock(mutex_);
  Entry& entry = entry_for(def, what);
  if (made.defined()) {
    initialise(entry, made, what);
  } else if (request.value_partial()) {
    Tensor whole = fill(entry.filling, entry.dtype, entry.shape,
                        from_proto(request.initial_value(), what), request.value_first_row(), what);
    if (whole.defined()) initialise(entry, whole, what);
  } else if (request.has_initial_value()) {
    initialise(entry, from_proto(request.initial_value(), what), what);
  } else {
    wait_for(
        request.timeout_seconds(), [&] { return entry.variable != nullptr; },
        str_cat(what, ": the chief has not initialised it"));
  }
  lock.unlock();
  CreateResponse response;
  if (request.want_value()) {
    std::lock_guard<std::mutex> hold(entry.mutex);
    to_proto(entry.variable->tensor(), response.mutable_value());
  }
  return response;
}

// The entry `def` names, made on first sight; the same name must keep its type.
Entry& Shard::entry_for(const VariableDef& def, const std::string& what) {
  DType dtype = checked_dtype(def.dtype(), what);
  Shape shape = checked_shape(def.shape(), what);
  std::unique_ptr<Entry>& slot = entries_[def.name()];
  if (!slot) {
    slot = std::make_unique<Entry>();
    slot->def = def;
    slot->dtype = dtype;
    slot->shape = shape;
  } else if (slot->dtype != dtype || slot->shape != shape) {
    throw InvalidArgumentError(str_cat(what, " exists as ", describe(slot->dtype, slot->shape),
                                       "; a worker asked for it as ", describe(dtype, shape),
                                       " (do all workers run the same model_fn?)"));
  }
  return *slot;
}

// The chief's value for `entry`, which makes the chief (again) the owner of its optimizer
// state: the chief sends that with its first push.
void Shard::initialise(Entry& entry, const Tensor& value, const std::string& what) {
  if (value.dtype() != entry.dtype || value.shape() != entry.shape) {
    throw InvalidArgumentError(str_cat(what, ": the initial value is ",
                                       describe(value.dtype(), value.shape()), "; the variable is ",
                                       describe(entry.dtype, entry.shape)));
  }
  std::lock_guard<std::mutex> hold(entry.mutex);
  if (entry.variable) {
    for (auto& saved : entry.saving) saved->keep_all();
    entry.variable->assign(value);
  } else {
    nn::VariableSpec spec;
    spec.name = entry.def.name();
    spec.shape = entry.shape;
    spec.dtype = entry.dtype;
    spec.trainable = entry.def.trainable();
    entry.variable = std::make_shared<nn::Variable>(spec, value);
  }
  entry.optimizer_state.clear();
  changed_.notify_all();
}

Entry& Shard::initialised(const std::string& name) {
  MutexLock lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw NotFoundError(str_cat(task_, " holds no variable '", name,
                                "' (do all workers run the same model_fn and placement?)"));
  }
  if (!it->second->variable) {
    throw FailedPreconditionError(str_cat(task_, ": variable '", name, "' is not initialised yet"));
  }
  return *it->second;
}

PullResponse Shard::pull(const PullRequest& request) {
  ++pulls_;
  PullResponse response;
  for (const PullItem& item : request.items()) {
    Entry& entry = initialised(item.name());
    std::string what = str_cat(task_, ": pull of '", item.name(), "'");
    Tensor ids;
    if (item.has_rows()) ids = row_ids(from_proto(item.rows(), what), entry, what);
    std::lock_guard<std::mutex> hold(entry.mutex);
    NoGradScope no_grad;
    const Tensor& value = entry.variable->tensor();
    to_proto(item.has_rows() ? cadre::gather(value, ids, 0) : value, response.add_values());
  }
  return response;
}

UnitsResponse Shard::units(const UnitsRequest& request) {
  UnitsResponse response = units_.serve(request, task_);
  MutexLock lock(mutex_);
  response.set_global_step(global_step_ ? *global_step_ : -1);
  return response;
}

int64_t Shard::global_step(const GlobalStepRequest& request) {
  MutexLock lock(mutex_);
  if (request.set()) {
    positions_.clear();
    global_step_ = request.value();
    changed_.notify_all();
  } else {
    wait_for(
        request.timeout_seconds(),
        [&]() CADRE_REQUIRES(mutex_) { return global_step_.has_value(); },
        str_cat(task_, ": the chief has not set the global step"));
  }
  return *global_step_;
}

InputPositionsResponse Shard::input_positions(const InputPositionsRequest& request) {
  if (request.ended()) positions_.end(request.pipeline(), task_);
  MutexLock lock(mutex_);  // as of a moment between pushes
  InputPositionsResponse response = positions_.list(request);
  response.set_global_step(global_step_.value_or(-1));
  return response;
}

// ---------------------------------------------------------------- updates

PushResponse Shard::push(const PushRequest& request) {
  InputPositions::check(request, task_);
  ++pushes_;
  PushResponse response;
  std::vector<Entry*> entries;
  std::map<std::string, Tensor> made;
  if (request.from_chief()) made = own_slots(request);
  {
    MutexLock lock(mutex_);
    OptimizerState& state = optimizers_.find_or_make(request.optimizer());
    const std::string name = state.optimizer->name();
    if (request.from_chief()) take_optimizer_state(request, name, state, made);
    if (request.max_staleness() > 0 && global_step_ &&
        *global_step_ - request.pulled_step() > request.max_staleness()) {
      ++dropped_;
      response.set_dropped(true);
      response.set_global_step(*global_step_);
      count_batch(request, response);
      return response;
    }
    entries = entries_to_update(request);
  }
  if (request.unit() != 0) {
    int64_t applied =
        units_.reserve(request.unit_generation(), request.unit(), request.unit_steps());
    if (applied == 0) {
      MutexLock lock(mutex_);
      response.set_unit_closed(true);
      if (global_step_) response.set_global_step(*global_step_);
      // A unit complete: its batch was taken all the same. A unit of a client replaced since:
      // the new client restored a checkpoint, and the worker reads that batch again.
      if (request.unit_generation() == units_.generation()) {
        count_batch(request, response);
      } else {
        response.set_unit_replaced(true);
      }
      return response;
    }
    response.set_unit_applied(applied);
    try {
      return apply_push(request, entries, response);
    } catch (...) {
      units_.release(request.unit());
      throw;
    }
  }
  return apply_push(request, entries, response);
}

PushResponse Shard::apply_push(const PushRequest& request, const std::vector<Entry*>& entries,
                               PushResponse response) {
  std::shared_ptr<nn::Optimizer> optimizer;
  int64_t step = 0;
  // Checked before waiting for the chief: a malformed push fails at once.
  std::vector<Gradient> gradients;
  for (size_t i = 0; i < entries.size(); ++i) {
    gradients.push_back(gradient_of(request.items(static_cast<int>(i)), *entries[i], task_));
  }
  {
    MutexLock lock(mutex_);
    OptimizerState& state = optimizers_.find_or_make(request.optimizer());
    const std::string name = state.optimizer->name();
    for (Entry* entry : entries) {
      wait_for(
          request.timeout_seconds(), [&] { return entry->optimizer_state.count(name) > 0; },
          str_cat(task_, ": the ", name, " state of '", entry->def.name(),
                  "' has not come from the chief"));
    }
    optimizer = state.optimizer;
    if (!request.items().empty()) step = request.step() > 0 ? request.step() : ++state.iterations;
  }
  response.set_step(step);
  if (!entries.empty()) apply(*optimizer, entries, gradients, step);
  for (const NamedTensor& delta : request.deltas()) add_delta(delta);
  if (request.increment_global_step()) {
    MutexLock lock(mutex_);
    if (!global_step_) {
      throw FailedPreconditionError(str_cat(task_, " holds no global step yet"));
    }
    response.set_global_step(++*global_step_);
    count_batch(request, response);
  }
  return response;
}

void Shard::count_batch(const PushRequest& request, PushResponse& response) {
  if (request.input_pipeline() == 0 || !request.increment_global_step()) return;
  response.set_input_position_wanted(positions_.count(request, response.global_step()));
}

std::vector<Entry*> Shard::entries_to_update(const PushRequest& request) {
  std::vector<Entry*> entries;
  std::set<std::string> seen;
  for (const PushItem& item : request.items()) {
    if (!seen.insert(item.name()).second) {
      throw InvalidArgumentError(str_cat(task_, ": a push names '", item.name(), "' twice"));
    }
    auto it = entries_.find(item.name());
    if (it == entries_.end() || !it->second->variable) {
      throw NotFoundError(
          str_cat(task_, " holds no initialised variable '", item.name(), "' to update"));
    }
    Entry* entry = it->second.get();
    entries.push_back(entry);
  }
  return entries;
}

void Shard::take_optimizer_state(const PushRequest& request, const std::string& optimizer,
                                 OptimizerState& state, const std::map<std::string, Tensor>& made) {
  for (const NamedTensor& slot : request.slots()) {
    auto owner = entries_.find(slot.slot_of());
    if (owner == entries_.end() || !owner->second->variable) {
      throw NotFoundError(str_cat(task_, ": slot '", slot.name(),
                                  "' belongs to an unknown variable '", slot.slot_of(), "'"));
    }
    std::string what = str_cat(task_, ": slot '", slot.name(), "'");
    auto own = made.find(slot.name());
    Tensor value = own != made.end() ? own->second : from_proto(slot.value(), what);
    if (slot.partial()) {
      if (value.rank() == 0 || owner->second->shape.rank() == 0) {
        throw InvalidArgumentError(str_cat(what, ": chunks of a 0-d slot"));
      }
      Filling& filling = slot_filling_[slot.name()];
      value = fill(filling, value.dtype(), value.shape().with_dim(0, owner->second->shape[0]),
                   value, slot.first_row(), what);
      if (!value.defined()) continue;
      slot_filling_.erase(slot.name());
    }
    std::lock_guard<std::mutex> hold(owner->second->mutex);
    if (nn::Variable* existing = slots_.find(slot.name())) {
      for (auto& saved : owner->second->saving) saved->keep_all();
      existing->assign(value);
      continue;
    }
    nn::VariableSpec spec;
    spec.name = slot.name();
    spec.shape = value.shape();
    spec.dtype = value.dtype();
    spec.trainable = false;
    spec.slot_of = slot.slot_of();
    slots_.add(std::make_shared<nn::Variable>(spec, value));
  }
  for (const std::string& name : request.slots_for()) {
    auto it = entries_.find(name);
    if (it != entries_.end()) it->second->optimizer_state.insert(optimizer);
  }
  if (request.has_initial_iterations()) state.iterations = request.initial_iterations();
  changed_.notify_all();
}

// One update of the entries, each locked (in name order, so that pushes sharing variables
// cannot deadlock) for the whole update.
void Shard::apply(nn::Optimizer& optimizer, const std::vector<Entry*>& entries,
                  const std::vector<Gradient>& gradients, int64_t step) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries[a]->def.name() < entries[b]->def.name(); });
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i : order) locks.emplace_back(entries[i]->mutex);
  keep_for_snapshot(optimizer, entries, gradients);
  std::vector<nn::Variable*> variables;
  for (Entry* e : entries) variables.push_back(e->variable.get());
  nn::VariableStoreScope scope(slots_);
  optimizer.apply_updates(gradients, variables, step);
}

// variable += delta, for a non-trainable variable.
void Shard::add_delta(const NamedTensor& delta) {
  Entry& entry = initialised(delta.name());
  std::string what = str_cat(task_, ": the update of '", delta.name(), "'");
  if (entry.def.trainable()) {
    throw InvalidArgumentError(str_cat(what,
                                       " adds to a trainable variable; those take "
                                       "gradients through the optimizer"));
  }
  Tensor value = from_proto(delta.value(), what);
  if (value.shape() != entry.shape || value.dtype() != entry.dtype) {
    throw InvalidArgumentError(str_cat(what, " is ", describe(value.dtype(), value.shape()),
                                       "; the variable is ", describe(entry.dtype, entry.shape)));
  }
  std::lock_guard<std::mutex> hold(entry.mutex);
  NoGradScope no_grad;
  for (auto& saved : entry.saving) saved->keep_all();
  entry.variable->assign(entry.variable->tensor() + value);
}

std::string Shard::report() {
  MutexLock lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [name, entry] : entries_) {
    if (entry->variable) bytes += static_cast<int64_t>(entry->variable->tensor().nbytes());
  }
  return str_cat(task_, ": serving ", entries_.size(), " variable(s) (", bytes / 1024, " KiB) and ",
                 slots_.variables().size(), " slot(s); global step ",
                 global_step_ ? std::to_string(*global_step_) : std::string("unset"), "; ",
                 pushes_.exchange(0), " pushes, ", pulls_.exchange(0), " pulls and ",
                 dropped_.exchange(0), " stale pushes dropped");
}

}  // namespace cadre::ps
