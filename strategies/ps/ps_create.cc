// PsVariables' creation of variables on the ps tasks: the chief's values (restored or
// initialised), which the other workers take; or, when the chief restores a row-access
// variable (an embedding table, the bulk of a model), the checkpoint rows each ps task reads
// itself (ps.proto's RestoreRows), so that the chief never holds the table and every task
// reads its share at once; or, on a fresh start, the built-in initializer each ps task fills
// its rows from (ps.proto's InitialFill), to the same end.
#include <glog/logging.h>

#include <algorithm>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/runtime/in_parallel.h"
#include "core/tensor/caching_allocator.h"
#include "strategies/ps/fill_proto.h"
#include "strategies/ps/message_budget.h"
#include "strategies/ps/ps_variables.h"
#include "strategies/ps/row_cache.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

// Trainable variables live on the ps tasks, and so do non-trainable floating-point ones
// (batch norm's moving statistics), which every worker's steps update; integer counters
// stay with each worker.
bool on_ps(const nn::VariableSpec& spec) {
  return spec.trainable || (spec.slot_of.empty() && is_floating(spec.dtype));
}

CreateRequest create_request(const nn::VariableSpec& spec, const Slice& s) {
  CreateRequest request;
  VariableDef* def = request.mutable_variable();
  def->set_name(s.name);
  def->set_logical_name(spec.name);
  def->set_first_row(s.first_row);
  def->set_dtype(static_cast<int32_t>(spec.dtype));
  for (int d = 0; d < spec.shape.rank(); ++d) def->add_shape(d == 0 ? s.rows : spec.shape[d]);
  def->set_trainable(spec.trainable);
  return request;
}

// Rows of `rows` a chunk of about kFillChunkBytes holds (all of a 0-d tensor).
int64_t chunk_rows(const Tensor& rows) {
  if (rows.rank() == 0) return 1;
  return std::max<int64_t>(
      1, kFillChunkBytes / std::max<int64_t>(1, static_cast<int64_t>(row_bytes(rows))));
}

// The first element of slice `s` within a whole value of `shape` (row-major).
int64_t first_element(const Shape& shape, const Slice& s) {
  if (shape.rank() == 0) return 0;
  int64_t row = 1;
  for (int d = 1; d < shape.rank(); ++d) row *= shape[d];
  return s.first_row * row;
}

// The dtype and shape of slice `s` of a slot the ps task makes itself.
void set_slot_type(const nn::VariableSpec& spec, const Slice& s, TensorData* value) {
  value->set_dtype(static_cast<int32_t>(spec.dtype));
  for (int d = 0; d < spec.shape.rank(); ++d) value->add_shape(d == 0 ? s.rows : spec.shape[d]);
}

// How the ps tasks can fill `spec` themselves: on a fresh start, where `base` is
// default_variable_creator (it restores nothing), and the initializer a built-in one.
std::optional<nn::InitialFill> fresh_fill(const nn::VariableCreator& base,
                                          const nn::VariableSpec& spec, uint64_t seed) {
  using Creator = std::shared_ptr<nn::Variable> (*)(const nn::VariableSpec&, uint64_t);
  const Creator* creator = base.target<Creator>();
  if (creator == nullptr || *creator != &nn::default_variable_creator) return std::nullopt;
  return nn::initial_fill(spec, seed);
}

void set_rows(const VariableSource& source, const Slice& s, RestoreRows* rows) {
  rows->set_checkpoint(source.checkpoint);
  rows->set_name(source.name);
  rows->set_first_row(s.first_row);
}

}  // namespace

std::shared_ptr<nn::Variable> PsVariables::create(const nn::VariableSpec& spec, uint64_t seed) {
  DeviceScope on_host(Device::cpu(0));
  if (!on_ps(spec)) return base_(spec, seed);  // stays on this worker
  std::promise<std::shared_ptr<nn::Variable>> made;
  {
    MutexLock lock(mutex_);
    if (auto it = creating_.find(spec.name); it != creating_.end()) {
      std::shared_future<std::shared_ptr<nn::Variable>> pending = it->second;
      lock.unlock();
      return pending.get();  // another replica is creating it
    }
    creating_[spec.name] = made.get_future().share();
  }
  try {
    std::shared_ptr<nn::Variable> variable = create_remote(spec, seed);
    made.set_value(variable);
    return variable;
  } catch (...) {
    made.set_exception(std::current_exception());
    throw;
  }
}

std::shared_ptr<nn::Variable> PsVariables::create_remote(const nn::VariableSpec& spec,
                                                         uint64_t seed) {
  std::vector<Slice> slices;
  {
    MutexLock lock(mutex_);
    slices = placement_.place(spec.name, spec.shape, spec.dtype);
  }
  NoGradScope no_grad;
  const bool row_access = spec.row_access && spec.shape.rank() > 0;
  // A non-trainable row-access variable's chief holds the whole value anyway (synced).
  std::optional<nn::InitialFill> fill;
  if (chief_ && (spec.trainable || !row_access)) fill = fresh_fill(base_, spec, seed);
  Tensor value, synced;
  if (chief_ && row_access && !fill) {
    // A row-access variable's local copy only ever holds the rows a step fetched: the chief
    // keeps no copy of the value it gives, and fresh memory costs nothing until rows are
    // written into it. A trainable one restored is read by the ps tasks themselves.
    if (!spec.trainable || !restore_on_ps(spec, slices)) {
      Tensor initial = host(base_(spec, seed)->tensor());
      create_slices(spec, slices, initial);
      if (!spec.trainable) synced = initial.clone();
    }
    // The initial value's memory goes back to the system: kept in the allocator's cache it
    // would stay resident, and the local copy below would take it.
    cpu_allocator().release_cached();
    value = Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
  } else {
    // Filled by the ps tasks, the local copy takes their values, as another worker's does.
    value = chief_ && !fill ? host(base_(spec, seed)->tensor()).clone()
                            : Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
    create_slices(spec, slices, value, fill ? &*fill : nullptr);
    if (!spec.trainable) synced = value.clone();
  }
  auto variable = std::make_shared<nn::Variable>(spec, value);
  Remote remote{variable, slices, nullptr, synced};
  if (row_access) {
    remote.rows = std::make_shared<RowCache>(clients_, slices, spec.shape[0]);
    variable->set_remote(remote.rows);
  }
  MutexLock lock(mutex_);
  remote_[spec.name] = std::move(remote);
  order_.push_back(spec.name);
  return variable;
}

// A ps task's slices one after another (so that at most a slice per task is in flight),
// the tasks concurrently.
void PsVariables::for_each_slice(const std::vector<Slice>& slices,
                                 const std::function<void(const Slice&)>& fn) {
  std::vector<std::vector<const Slice*>> by_ps(clients_.size());
  for (const Slice& s : slices) by_ps[static_cast<size_t>(s.ps)].push_back(&s);
  std::vector<int> which;
  for (size_t p = 0; p < by_ps.size(); ++p) {
    if (!by_ps[p].empty()) which.push_back(static_cast<int>(p));
  }
  in_parallel(which, [&](int p) {
    for (const Slice* s : by_ps[static_cast<size_t>(p)]) fn(*s);
  });
}

void PsVariables::create_slices(const nn::VariableSpec& spec, const std::vector<Slice>& slices,
                                Tensor& value, const nn::InitialFill* fill) {
  for_each_slice(slices, [&](const Slice& s) {
    if (chief_ && fill == nullptr) {
      send_value(spec, s, rows_of(value, s));
      return;
    }
    CreateRequest request = create_request(spec, s);
    if (fill != nullptr) to_proto(*fill, first_element(spec.shape, s), request.mutable_fill());
    request.set_want_value(!spec.row_access);
    request.set_timeout_seconds(options_.init_timeout_seconds);
    CreateResponse response = clients_[static_cast<size_t>(s.ps)]->create(request);
    if (request.want_value()) {
      write_rows(value, from_proto(response.value(), s.name), value.rank() == 0 ? 0 : s.first_row);
    }
  });
}

void PsVariables::send_value(const nn::VariableSpec& spec, const Slice& s, const Tensor& rows) {
  const int64_t n = rows.rank() == 0 ? 1 : rows.dim(0), per = chunk_rows(rows);
  for (int64_t first = 0; first < n; first += per) {
    CreateRequest request = create_request(spec, s);
    const bool partial = per < n;
    to_proto(partial ? rows.slice(0, first, std::min(n, first + per)) : rows,
             request.mutable_initial_value());
    request.set_value_partial(partial);
    request.set_value_first_row(first);
    request.set_timeout_seconds(options_.init_timeout_seconds);
    clients_[static_cast<size_t>(s.ps)]->create(request);
  }
}

PushRequest PsVariables::slot_push(const OptimizerSpec& optimizer, const Slice& s,
                                   const std::string& suffix) const {
  PushRequest request;
  *request.mutable_optimizer() = optimizer;
  request.set_from_chief(true);
  request.set_timeout_seconds(options_.init_timeout_seconds);
  NamedTensor* slot = request.add_slots();
  slot->set_name(s.name + suffix);
  slot->set_slot_of(s.name);
  return request;
}

void PsVariables::send_slot(const OptimizerSpec& optimizer, const Slice& s,
                            const std::string& suffix, const Tensor& rows) {
  const int64_t n = rows.rank() == 0 ? 1 : rows.dim(0), per = chunk_rows(rows);
  for (int64_t first = 0; first < n; first += per) {
    PushRequest request = slot_push(optimizer, s, suffix);
    NamedTensor* slot = request.mutable_slots(0);
    const bool partial = per < n;
    to_proto(partial ? rows.slice(0, first, std::min(n, first + per)) : rows,
             slot->mutable_value());
    slot->set_partial(partial);
    slot->set_first_row(first);
    clients_[static_cast<size_t>(s.ps)]->push(request);
  }
}

std::optional<VariableSource> PsVariables::source_of(const nn::VariableSpec& spec) const {
  if (!sources_ || !options_.restore_on_ps_tasks || !restore_on_ps_) return std::nullopt;
  return sources_(spec);
}

void PsVariables::restore_on_chief(const Error& why) {
  if (restore_on_ps_.exchange(false)) {
    LOG(WARNING) << "the ps tasks cannot read the checkpoint themselves (" << why.what()
                 << "); the chief restores the variables and sends them";
  }
}

bool PsVariables::sent_or_chief_restores(const std::function<void()>& send) {
  try {
    send();
  } catch (const FailedPreconditionError& why) {
    restore_on_chief(why);
    return false;
  } catch (const NotFoundError& why) {  // not the chief's file system
    restore_on_chief(why);
    return false;
  }
  return true;
}

bool PsVariables::restore_on_ps(const nn::VariableSpec& spec, const std::vector<Slice>& slices) {
  std::optional<VariableSource> source = source_of(spec);
  if (!source) return false;
  return sent_or_chief_restores([&] {
    for_each_slice(slices, [&](const Slice& s) {
      CreateRequest request = create_request(spec, s);
      set_rows(*source, s, request.mutable_restore());
      request.set_timeout_seconds(options_.init_timeout_seconds);
      clients_[static_cast<size_t>(s.ps)]->create(request);
    });
  });
}

bool PsVariables::restore_slot_on_ps(const nn::VariableSpec& spec, const nn::Variable& target,
                                     const std::vector<Slice>& slices,
                                     const OptimizerSpec& optimizer) {
  // A slot is read in its variable's slices: it must have the variable's rows.
  if (spec.shape.rank() == 0 || spec.shape[0] != target.shape()[0]) return false;
  std::optional<VariableSource> source = source_of(spec);
  if (!source) return false;
  const std::string suffix = spec.name.substr(target.name().size());
  return sent_or_chief_restores([&] {
    for_each_slice(slices, [&](const Slice& s) {
      PushRequest request = slot_push(optimizer, s, suffix);
      NamedTensor* slot = request.mutable_slots(0);
      set_slot_type(spec, s, slot->mutable_value());
      set_rows(*source, s, slot->mutable_restore());
      clients_[static_cast<size_t>(s.ps)]->push(request);
    });
  });
}

bool PsVariables::fill_slot_on_ps(const nn::VariableSpec& spec, const nn::Variable& target,
                                  const std::vector<Slice>& slices,
                                  std::vector<PushRequest>& requests) const {
  // A slot is cut as its variable is: it must have the variable's rows, or be its one slice.
  const bool in_rows =
      spec.shape.rank() > 0 ? spec.shape[0] == target.shape()[0] : slices.size() == 1;
  std::optional<nn::InitialFill> fill = in_rows ? fresh_fill(base_, spec, seed_) : std::nullopt;
  if (!fill) return false;
  const std::string suffix = spec.name.substr(target.name().size());
  for (const Slice& s : slices) {
    NamedTensor* slot = requests[static_cast<size_t>(s.ps)].add_slots();
    slot->set_name(s.name + suffix);
    slot->set_slot_of(s.name);
    set_slot_type(spec, s, slot->mutable_value());
    to_proto(*fill, first_element(spec.shape, s), slot->mutable_fill());
  }
  return true;
}

}  // namespace cadre::ps
