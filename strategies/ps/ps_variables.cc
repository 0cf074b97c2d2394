#include "strategies/ps/ps_variables.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

// fn(i) for each i of `which`, in parallel when there are several; rethrows the first error
// once all have ended.
void in_parallel(const std::vector<int>& which, const std::function<void(int)>& fn) {
  if (which.size() == 1) {
    fn(which[0]);
    return;
  }
  std::vector<std::future<void>> done;
  for (int i : which) done.push_back(std::async(std::launch::async, fn, i));
  std::exception_ptr first;
  for (auto& f : done) {
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

size_t row_bytes(const Tensor& t) {
  if (t.rank() == 0) return t.nbytes();
  return t.dim(0) == 0 ? 0 : t.nbytes() / static_cast<size_t>(t.dim(0));
}

// Writes `rows` over rows [first, first + rows.dim(0)) of `local` (both on the host,
// `local` contiguous).
void write_rows(Tensor& local, const Tensor& rows, int64_t first) {
  Tensor src = rows.contiguous();
  std::memcpy(static_cast<char*>(local.raw_data()) + static_cast<size_t>(first) * row_bytes(local),
              src.raw_data(), src.nbytes());
}

Tensor rows_of(const Tensor& t, const Slice& slice) {
  return t.rank() == 0 ? t : t.slice(0, slice.first_row, slice.first_row + slice.rows);
}

Tensor host(const Tensor& t) { return t.to(Device::cpu(0)).contiguous(); }

// Trainable variables live on the ps tasks, and so do non-trainable floating-point ones
// (batch norm's moving statistics), which every worker's steps update; integer counters
// stay with each worker.
bool on_ps(const nn::VariableSpec& spec) {
  return spec.trainable || (spec.slot_of.empty() && is_floating(spec.dtype));
}

std::vector<int64_t> ids_of(const Tensor& ids) {
  NoGradScope no_grad;
  return host(ids.cast(DType::kInt64)).to_vector<int64_t>();
}

}  // namespace

// The local copy of a row-access variable (an embedding table): rows are fetched from the
// ps tasks when a step first looks them up, and go stale when the next step begins.
class RowCache : public nn::RemoteSource {
 public:
  RowCache(const std::vector<std::unique_ptr<PsClient>>& clients, std::vector<Slice> slices,
           int64_t rows)
      : clients_(clients), slices_(std::move(slices)), fresh_(static_cast<size_t>(rows), 0) {}

  void fetch(Tensor local) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (all_fresh_) return;
    std::vector<int> which(slices_.size());
    for (size_t k = 0; k < slices_.size(); ++k) which[k] = static_cast<int>(k);
    in_parallel(which, [&](int k) {
      const Slice& s = slices_[static_cast<size_t>(k)];
      PullRequest request;
      request.add_items()->set_name(s.name);
      PullResponse response = clients_[static_cast<size_t>(s.ps)]->pull(request);
      write_rows(local, from_proto(response.values(0), s.name), s.first_row);
    });
    all_fresh_ = true;
  }

  void fetch_rows(Tensor local, const Tensor& ids) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (all_fresh_) return;
    // This step's new rows, by slice (out-of-range ids are left to the lookup to report).
    std::vector<std::vector<int64_t>> wanted(slices_.size());
    for (int64_t id : ids_of(ids)) {
      if (id < 0 || id >= static_cast<int64_t>(fresh_.size()) || fresh_[id]) continue;
      fresh_[id] = 1;
      touched_.push_back(id);
      wanted[slice_of(id)].push_back(id);
    }
    std::vector<int> which;
    for (size_t k = 0; k < slices_.size(); ++k) {
      if (!wanted[k].empty()) which.push_back(static_cast<int>(k));
    }
    if (which.empty()) return;
    in_parallel(which, [&](int k) {
      const Slice& s = slices_[static_cast<size_t>(k)];
      const std::vector<int64_t>& rows = wanted[static_cast<size_t>(k)];
      std::vector<int64_t> local_ids(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) local_ids[i] = rows[i] - s.first_row;
      PullRequest request;
      PullItem* item = request.add_items();
      item->set_name(s.name);
      to_proto(Tensor::from_vector(local_ids), item->mutable_rows());
      PullResponse response = clients_[static_cast<size_t>(s.ps)]->pull(request);
      Tensor values = from_proto(response.values(0), s.name);
      size_t bytes = row_bytes(local);
      for (size_t i = 0; i < rows.size(); ++i) {
        std::memcpy(static_cast<char*>(local.raw_data()) + static_cast<size_t>(rows[i]) * bytes,
                    static_cast<const char*>(values.raw_data()) + i * bytes, bytes);
      }
    });
  }

  void invalidate() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t id : touched_) fresh_[id] = 0;
    touched_.clear();
    all_fresh_ = false;
  }

 private:
  size_t slice_of(int64_t row) const {
    for (size_t k = 0; k + 1 < slices_.size(); ++k) {
      if (row < slices_[k + 1].first_row) return k;
    }
    return slices_.size() - 1;
  }

  const std::vector<std::unique_ptr<PsClient>>& clients_;
  std::vector<Slice> slices_;
  std::mutex mutex_;
  std::vector<uint8_t> fresh_;    // GUARDED_BY(mutex_), per row
  std::vector<int64_t> touched_;  // GUARDED_BY(mutex_), rows marked fresh
  bool all_fresh_ = false;        // GUARDED_BY(mutex_)
};

namespace {

std::vector<std::unique_ptr<nn::VariableStore>> one_store(
    PsVariables* self, uint64_t seed,
    std::function<std::shared_ptr<nn::Variable>(const nn::VariableSpec&, uint64_t)> create) {
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  stores.push_back(std::make_unique<nn::VariableStore>(seed, std::move(create)));
  return stores;
}

}  // namespace

PsVariables::PsVariables(const std::vector<std::unique_ptr<PsClient>>& clients,
                         const ParameterServerOptions& options, bool chief, uint64_t seed,
                         nn::VariableCreator base, int replicas)
    : DistributedVariables(
          one_store(this, seed,
                    [this](const nn::VariableSpec& spec, uint64_t s) { return create(spec, s); }),
          replicas),
      clients_(clients),
      options_(options),
      chief_(chief),
      seed_(seed),
      base_(std::move(base)),
      placement_(static_cast<int>(clients.size()), options.placement) {}

PsVariables::~PsVariables() = default;

std::shared_ptr<nn::Variable> PsVariables::create(const nn::VariableSpec& spec, uint64_t seed) {
  DeviceScope on_host(Device::cpu(0));
  if (!on_ps(spec)) return base_(spec, seed);  // stays on this worker
  std::promise<std::shared_ptr<nn::Variable>> made;
  {
    std::unique_lock<std::mutex> lock(mutex_);
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
    std::lock_guard<std::mutex> lock(mutex_);
    slices = placement_.place(spec.name, spec.shape, spec.dtype);
  }
  NoGradScope no_grad;
  Tensor value = chief_ ? host(base_(spec, seed)->tensor()).clone()
                        : Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
  std::vector<int> which(slices.size());
  for (size_t k = 0; k < slices.size(); ++k) which[k] = static_cast<int>(k);
  in_parallel(which, [&](int k) {
    const Slice& s = slices[static_cast<size_t>(k)];
    CreateRequest request;
    VariableDef* def = request.mutable_variable();
    def->set_name(s.name);
    def->set_logical_name(spec.name);
    def->set_first_row(s.first_row);
    def->set_dtype(static_cast<int32_t>(spec.dtype));
    for (int d = 0; d < spec.shape.rank(); ++d) def->add_shape(d == 0 ? s.rows : spec.shape[d]);
    def->set_trainable(spec.trainable);
    if (chief_) to_proto(rows_of(value, s), request.mutable_initial_value());
    request.set_want_value(!chief_ && !spec.row_access);
    request.set_timeout_seconds(options_.init_timeout_seconds);
    CreateResponse response = clients_[static_cast<size_t>(s.ps)]->create(request);
    if (request.want_value()) {
      write_rows(value, from_proto(response.value(), s.name), value.rank() == 0 ? 0 : s.first_row);
    }
  });
  auto variable = std::make_shared<nn::Variable>(spec, value);
  Remote remote{variable, slices, nullptr, spec.trainable ? Tensor() : value.clone()};
  if (spec.row_access && spec.shape.rank() > 0) {
    remote.rows = std::make_shared<RowCache>(clients_, slices, spec.shape[0]);
    variable->set_remote(remote.rows);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  remote_[spec.name] = std::move(remote);
  order_.push_back(spec.name);
  return variable;
}

void PsVariables::pull() {
  std::vector<PullRequest> requests(clients_.size());
  std::vector<std::vector<std::pair<nn::Variable*, const Slice*>>> targets(clients_.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& name : order_) {
      Remote& r = remote_.at(name);
      if (r.rows) {
        r.rows->invalidate();
        continue;
      }
      for (const Slice& s : r.slices) {
        requests[static_cast<size_t>(s.ps)].add_items()->set_name(s.name);
        targets[static_cast<size_t>(s.ps)].emplace_back(r.variable.get(), &s);
      }
    }
  }
  std::vector<int> which;
  for (size_t p = 0; p < clients_.size(); ++p) {
    if (!targets[p].empty()) which.push_back(static_cast<int>(p));
  }
  if (which.empty()) return;
  in_parallel(which, [&](int p) {
    PullResponse response =
        clients_[static_cast<size_t>(p)]->pull(requests[static_cast<size_t>(p)]);
    const auto& mine = targets[static_cast<size_t>(p)];
    for (size_t i = 0; i < mine.size(); ++i) {
      auto [variable, slice] = mine[i];
      Tensor value = from_proto(response.values(static_cast<int>(i)), slice->name);
      write_rows(variable->tensor(), value, variable->tensor().rank() == 0 ? 0 : slice->first_row);
    }
  });
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [name, r] : remote_) {
    if (r.synced.defined()) r.synced.assign(r.variable->tensor());
  }
}

void PsVariables::add_deltas(std::vector<PushRequest>& requests) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& name : order_) {
    Remote& r = remote_.at(name);
    if (!r.synced.defined()) continue;
    Tensor now = host(r.variable->tensor());
    if (!any(not_equal(now, r.synced)).item<bool>()) continue;
    Tensor delta = now - r.synced;
    for (const Slice& s : r.slices) {
      NamedTensor* item = requests[static_cast<size_t>(s.ps)].add_deltas();
      item->set_name(s.name);
      to_proto(rows_of(delta, s), item->mutable_value());
    }
    r.synced.assign(now);
  }
}

void PsVariables::add_optimizer_state(nn::Optimizer& optimizer,
                                      const std::vector<nn::Variable*>& targets,
                                      std::vector<PushRequest>& requests) {
  NoGradScope no_grad;
  DeviceScope on_host(Device::cpu(0));
  for (nn::Variable* target : targets) {
    std::string key = optimizer.name() + "/" + target->name();
    if (state_sent_.count(key)) continue;
    std::vector<Slice> slices;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = remote_.find(target->name());
      if (it == remote_.end()) continue;  // a local variable
      slices = it->second.slices;
    }
    for (const nn::VariableSpec& spec : optimizer.slot_variable_specs(*target)) {
      Tensor value = host(base_(spec, seed_)->tensor());
      std::string suffix = spec.name.substr(target->name().size());
      for (const Slice& s : slices) {
        NamedTensor* slot = requests[static_cast<size_t>(s.ps)].add_slots();
        slot->set_name(s.name + suffix);
        slot->set_slot_of(s.name);
        to_proto(rows_of(value, s), slot->mutable_value());
      }
    }
    for (const Slice& s : slices) requests[static_cast<size_t>(s.ps)].add_slots_for(s.name);
    state_sent_.insert(key);
  }
  for (size_t p = 0; p < clients_.size(); ++p) {
    std::string key = str_cat(optimizer.name(), "/", p);
    if (iterations_sent_.count(key)) continue;
    int64_t iterations = base_(optimizer.iterations_spec(), seed_)->tensor().item<int64_t>();
    requests[p].set_initial_iterations(iterations);
    requests[p].set_has_initial_iterations(true);
    iterations_sent_.insert(key);
  }
}

void PsVariables::push(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                       const std::vector<nn::Variable*>& targets) {
  NoGradScope no_grad;
  optimizer.clip_gradients(gradients);
  OptimizerSpec spec;
  to_proto(optimizer.config(), &spec);
  std::vector<PushRequest> requests(clients_.size());
  for (PushRequest& r : requests) {
    *r.mutable_optimizer() = spec;
    r.set_pulled_step(global_step());
    r.set_max_staleness(options_.max_staleness);
    r.set_timeout_seconds(options_.init_timeout_seconds);
    r.set_from_chief(chief_);
  }
  requests[0].set_increment_global_step(true);
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (!gradients[i].defined()) continue;
    std::vector<Slice> slices;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = remote_.find(targets[i]->name());
      if (it == remote_.end()) {
        throw InternalError(str_cat("variable '", targets[i]->name(),
                                    "' is trained but not on the parameter servers"));
      }
      slices = it->second.slices;
    }
    if (!gradients[i].is_sparse()) {
      Tensor dense = host(gradients[i].dense());
      for (const Slice& s : slices) {
        PushItem* item = requests[static_cast<size_t>(s.ps)].add_items();
        item->set_name(s.name);
        to_proto(rows_of(dense, s), item->mutable_dense());
      }
      continue;
    }
    IndexedSlices sparse = nn::deduplicate(gradients[i].sparse());
    std::vector<int64_t> ids = ids_of(sparse.indices);
    Tensor values = host(sparse.values);
    for (const Slice& s : slices) {
      std::vector<int64_t> positions, local;
      for (size_t j = 0; j < ids.size(); ++j) {
        if (ids[j] >= s.first_row && ids[j] < s.first_row + s.rows) {
          positions.push_back(static_cast<int64_t>(j));
          local.push_back(ids[j] - s.first_row);
        }
      }
      if (positions.empty()) continue;
      PushItem* item = requests[static_cast<size_t>(s.ps)].add_items();
      item->set_name(s.name);
      item->set_sparse(true);
      to_proto(Tensor::from_vector(local), item->mutable_indices());
      to_proto(cadre::gather(values, Tensor::from_vector(positions), 0), item->mutable_values());
    }
  }
  add_deltas(requests);
  if (chief_) add_optimizer_state(optimizer, targets, requests);
  std::vector<int> which{0};
  for (size_t p = 1; p < clients_.size(); ++p) {
    const PushRequest& r = requests[p];
    if (r.items_size() > 0 || r.deltas_size() > 0 || r.slots_size() > 0 ||
        r.has_initial_iterations()) {
      which.push_back(static_cast<int>(p));
    }
  }
  std::vector<PushResponse> responses(clients_.size());
  auto send = [&](int p) {
    responses[static_cast<size_t>(p)] =
        clients_[static_cast<size_t>(p)]->push(requests[static_cast<size_t>(p)]);
  };
  if (options_.max_staleness > 0) {
    // ps 0 judges staleness first: a dropped update goes to no ps task.
    send(0);
    if (responses[0].dropped()) {
      LOG_EVERY_N(INFO, 100) << "gradients from step " << requests[0].pulled_step()
                             << " were too stale at step " << responses[0].global_step()
                             << " (max_staleness " << options_.max_staleness << "); dropped";
    } else if (which.size() > 1) {
      in_parallel(std::vector<int>(which.begin() + 1, which.end()), send);
    }
  } else {
    in_parallel(which, send);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  global_step_ = responses[0].global_step();
  if (chief_ && !plan_logged_) {
    LOG(INFO) << "parameter-server placement:\n" << placement_.describe();
    plan_logged_ = true;
  }
}

int64_t PsVariables::global_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return global_step_;
}

void PsVariables::set_global_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  global_step_ = step;
}

std::shared_ptr<nn::VariableStore> PsVariables::gather() {
  NoGradScope no_grad;
  // What each ps task holds, by name.
  std::vector<std::map<std::string, NamedTensor>> held(clients_.size());
  std::vector<int> all(clients_.size());
  for (size_t p = 0; p < clients_.size(); ++p) all[p] = static_cast<int>(p);
  in_parallel(all, [&](int p) {
    ReadResponse listing = clients_[static_cast<size_t>(p)]->read(ReadRequest());
    for (const NamedTensor& t : listing.variables()) held[static_cast<size_t>(p)][t.name()] = t;
  });
  // Values, read in batches under the message limit.
  std::vector<std::map<std::string, Tensor>> values(clients_.size());
  in_parallel(all, [&](int p) {
    ReadRequest batch;
    int64_t bytes = 0;
    auto flush = [&] {
      if (batch.names().empty()) return;
      ReadResponse response = clients_[static_cast<size_t>(p)]->read(batch);
      for (const NamedTensor& t : response.variables()) {
        values[static_cast<size_t>(p)][t.name()] = from_proto(t.value(), t.name());
      }
      batch.clear_names();
      bytes = 0;
    };
    for (const auto& [name, t] : held[static_cast<size_t>(p)]) {
      int64_t size = static_cast<int64_t>(dtype_size(checked_dtype(t.value().dtype(), name)));
      for (int64_t d : t.value().shape()) size *= d;
      if (bytes + size > options_.max_message_bytes / 2) flush();
      batch.add_names(name);
      bytes += size;
    }
    flush();
  });

  auto store = std::make_shared<nn::VariableStore>();
  auto add = [&](const nn::VariableSpec& spec, Tensor value) {
    store->add(std::make_shared<nn::Variable>(spec, std::move(value)));
  };
  std::vector<std::string> order;
  std::map<std::string, Remote> remote;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    order = order_;
    remote = remote_;
  }
  for (const std::string& name : order) {
    const Remote& r = remote.at(name);
    const nn::VariableSpec& spec = r.variable->spec();
    Tensor whole = Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
    for (const Slice& s : r.slices) {
      write_rows(whole, values[static_cast<size_t>(s.ps)].at(s.name),
                 spec.shape.rank() == 0 ? 0 : s.first_row);
    }
    nn::VariableSpec logical = spec;
    logical.row_access = false;
    add(logical, whole);
    // Slots: those every slice has, named after the logical variable.
    const Slice& first = r.slices.front();
    for (const auto& [slot_name, t] : held[static_cast<size_t>(first.ps)]) {
      if (t.slot_of() != first.name) continue;
      std::string suffix = slot_name.substr(first.name.size());
      Tensor slot = Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
      for (const Slice& s : r.slices) {
        write_rows(slot, values[static_cast<size_t>(s.ps)].at(s.name + suffix),
                   spec.shape.rank() == 0 ? 0 : s.first_row);
      }
      nn::VariableSpec slot_spec;
      slot_spec.name = name + suffix;
      slot_spec.shape = spec.shape;
      slot_spec.dtype = spec.dtype;
      slot_spec.trainable = false;
      slot_spec.slot_of = name;
      add(slot_spec, slot);
    }
  }
  // Each optimizer's step counter: every ps task counts the pushes it applied; the most
  // advanced is the optimizer's.
  std::map<std::string, int64_t> iterations;
  for (size_t p = 0; p < clients_.size(); ++p) {
    for (const auto& [name, value] : values[p]) {
      if (!name.ends_with("/iterations") || held[p].at(name).slot_of() != "") continue;
      if (remote.count(name)) continue;
      int64_t v = value.item<int64_t>();
      iterations[name] = std::max(iterations[name], v);
    }
  }
  for (const auto& [name, v] : iterations) {
    nn::VariableSpec spec;
    spec.name = name;
    spec.shape = Shape{};
    spec.dtype = DType::kInt64;
    spec.trainable = false;
    add(spec, Tensor::scalar<int64_t>(v));
  }
  // This worker's own variables (integer counters); a local step counter that a hook made is
  // the ps tasks' above.
  for (nn::Variable* v : primary().variables()) {
    if (remote.count(v->name()) || store->find(v->name())) continue;
    store->add(std::shared_ptr<nn::Variable>(std::shared_ptr<void>(), v));
  }
  return store;
}

}  // namespace cadre::ps
