#include "strategies/ps/ps_variables.h"

#include <glog/logging.h>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "core/runtime/in_parallel.h"
#include "core/tensor/caching_allocator.h"
#include "strategies/ps/gather.h"
#include "strategies/ps/gradient_items.h"
#include "strategies/ps/message_budget.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/push_parts.h"
#include "strategies/ps/row_cache.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

std::vector<std::unique_ptr<nn::VariableStore>> one_store(uint64_t seed,
                                                          nn::VariableCreator create) {
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  stores.push_back(std::make_unique<nn::VariableStore>(seed, std::move(create)));
  return stores;
}

}  // namespace

PsVariables::PsVariables(const ParameterServers& servers, bool chief, uint64_t seed,
                         nn::VariableCreator base, VariableSourceFn sources)
    : DistributedVariables(one_store(
          seed, [this](const nn::VariableSpec& spec, uint64_t s) { return create(spec, s); })),
      clients_(servers.clients()),
      options_(servers.options()),
      work_unit_(servers.work_unit()),
      input_report_(servers.input_report()),
      chief_(chief),
      seed_(seed),
      base_(std::move(base)),
      sources_(std::move(sources)),
      placement_(static_cast<int>(clients_.size()), options_.placement,
                 max_slice_bytes(options_.max_message_bytes)) {}

PsVariables::~PsVariables() = default;

void PsVariables::pull() {
  // Each task's slices, pulled in batches under the message limit.
  std::vector<std::vector<std::pair<nn::Variable*, const Slice*>>> targets(clients_.size());
  {
    MutexLock lock(mutex_);
    for (const std::string& name : order_) {
      Remote& r = remote_.at(name);
      if (r.rows) {
        r.rows->invalidate();
        continue;
      }
      for (const Slice& s : r.slices) {
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
    const auto& mine = targets[static_cast<size_t>(p)];
    std::vector<int64_t> costs;
    for (auto [variable, slice] : mine) {
      int64_t bytes = static_cast<int64_t>(row_bytes(variable->tensor())) * slice->rows;
      costs.push_back(item_cost(bytes, slice->name));
    }
    for (auto [begin, end] : batches(costs, max_batch_bytes(options_.max_message_bytes))) {
      PullRequest request;
      for (size_t i = begin; i < end; ++i) request.add_items()->set_name(mine[i].second->name);
      PullResponse response = clients_[static_cast<size_t>(p)]->pull(request);
      for (size_t i = begin; i < end; ++i) {
        auto [variable, slice] = mine[i];
        Tensor value = from_proto(response.values(static_cast<int>(i - begin)), slice->name);
        write_rows(variable->tensor(), value,
                   variable->tensor().rank() == 0 ? 0 : slice->first_row);
      }
    }
  });
  MutexLock lock(mutex_);
  for (auto& [name, r] : remote_) {
    if (r.synced.defined()) r.synced.assign(r.variable->tensor());
  }
}

std::vector<Slice> PsVariables::slices_of(const nn::Variable& variable) {
  MutexLock lock(mutex_);
  auto it = remote_.find(variable.name());
  if (it == remote_.end()) {
    throw InternalError(
        str_cat("variable '", variable.name(), "' is trained but not on the parameter servers"));
  }
  return it->second.slices;
}

std::vector<PushRequest> PsVariables::push_requests(const nn::Optimizer& optimizer,
                                                    const std::vector<Gradient>& gradients,
                                                    const std::vector<nn::Variable*>& targets) {
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
    std::vector<Slice> slices = slices_of(*targets[i]);
    if (gradients[i].is_sparse()) {
      add_sparse(gradients[i].sparse(), slices, requests);
    } else {
      add_dense(gradients[i].dense(), slices, requests);
    }
  }
  return requests;
}

void PsVariables::add_deltas(std::vector<PushRequest>& requests) {
  MutexLock lock(mutex_);
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
    bool row_access = false;
    {
      MutexLock lock(mutex_);
      auto it = remote_.find(target->name());
      if (it == remote_.end()) continue;  // a local variable
      slices = it->second.slices;
      row_access = it->second.rows != nullptr;
    }
    for (const nn::VariableSpec& spec : optimizer.slot_variable_specs(*target)) {
      // A row-access variable's restored slots are read by the ps tasks, as the variable is.
      if (row_access && restore_slot_on_ps(spec, *target, slices, requests[0].optimizer())) {
        continue;
      }
      if (fill_slot_on_ps(spec, *target, slices, requests)) continue;
      Tensor value = host(base_(spec, seed_)->tensor());
      std::string suffix = spec.name.substr(target->name().size());
      for (const Slice& s : slices) {
        if (slices.size() > 1) {
          // A partitioned variable's slot (an embedding table's accumulator) goes a slice at
          // a time, now: the chief never holds a whole slot's messages beside the slot (a
          // 1 GiB accumulator took 1 GiB more). The ps task takes it (from_chief) and waits
          // for slots_for, which the push carries.
          send_slot(requests[static_cast<size_t>(s.ps)].optimizer(), s, suffix, rows_of(value, s));
          continue;
        }
        NamedTensor* slot = requests[static_cast<size_t>(s.ps)].add_slots();
        slot->set_name(s.name + suffix);
        slot->set_slot_of(s.name);
        to_proto(rows_of(value, s), slot->mutable_value());
      }
      value = Tensor();
      if (slices.size() > 1) cpu_allocator().release_cached();  // as create_remote does
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

PushResponse PsVariables::send(std::vector<PushRequest> requests) {
  std::vector<int> which{0};
  for (size_t p = 1; p < clients_.size(); ++p) {
    if (carries_anything(requests[p])) which.push_back(static_cast<int>(p));
  }
  int64_t unit = requests[0].unit(), pulled_step = requests[0].pulled_step();
  bool first_decides = options_.max_staleness != 0 || unit != 0;
  PushResponse first = send_push(clients_, std::move(requests), which,
                                 max_batch_bytes(options_.max_message_bytes), first_decides);
  if (first.unit_closed()) {
    LOG(INFO) << "a step of unit " << unit
              << " was not applied: the unit is complete or its coordinator was replaced";
  } else if (first.dropped()) {
    LOG_EVERY_N(INFO, 100) << "gradients from step " << pulled_step << " were too stale at step "
                           << first.global_step() << " (max_staleness " << options_.max_staleness
                           << "); dropped";
  }
  return first;
}

void PsVariables::push_part(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                            const std::vector<nn::Variable*>& targets, bool counts_the_step) {
  NoGradScope no_grad;
  optimizer.clip_gradients(gradients);
  std::vector<PushRequest> requests = push_requests(optimizer, gradients, targets);
  requests[0].set_increment_global_step(counts_the_step);
  add_deltas(requests);
  if (chief_) add_optimizer_state(optimizer, targets, requests);
  std::optional<WorkUnit> unit = counts_the_step ? work_unit_.current() : std::optional<WorkUnit>();
  if (unit) {
    requests[0].set_unit(unit->id);
    requests[0].set_unit_steps(unit->steps);
    requests[0].set_unit_generation(unit->generation);
  }
  const int pipeline = counts_the_step ? input_report_.pipeline() : 0;
  if (pipeline != 0) {
    requests[0].set_input_pipeline(pipeline);
    if (std::optional<std::string> position = input_report_.take()) {
      requests[0].set_has_input_position(true);
      requests[0].set_input_position(std::move(*position));
    }
  }
  PushResponse first = send(std::move(requests));
  if (pipeline != 0) input_report_.heard(first.input_position_wanted());
  if (unit) {
    work_unit_.record({unit->id, first.unit_applied(), first.unit_closed(), first.global_step(),
                       first.unit_replaced()});
  }
  MutexLock lock(mutex_);
  if (counts_the_step) global_step_ = first.global_step();
  if (chief_ && !plan_logged_) {
    LOG(INFO) << "parameter-server placement:\n" << placement_.describe();
    plan_logged_ = true;
  }
}

void PsVariables::send_part_state(nn::Optimizer& optimizer,
                                  const std::vector<nn::Variable*>& targets) {
  NoGradScope no_grad;
  std::vector<PushRequest> requests = push_requests(optimizer, {}, {});
  for (PushRequest& r : requests) r.set_from_chief(true);
  requests[0].set_increment_global_step(false);
  add_optimizer_state(optimizer, targets, requests);
  std::vector<int> which;
  for (size_t p = 0; p < clients_.size(); ++p) {
    if (carries_anything(requests[p])) which.push_back(static_cast<int>(p));
  }
  send_push(clients_, std::move(requests), which, max_batch_bytes(options_.max_message_bytes),
            /*first_decides=*/false);
  MutexLock lock(mutex_);
  if (!plan_logged_) {
    LOG(INFO) << "parameter-server placement:\n" << placement_.describe();
    plan_logged_ = true;
  }
}

int64_t PsVariables::global_step() const {
  MutexLock lock(mutex_);
  return global_step_;
}

std::shared_ptr<nn::VariableStore> PsVariables::gather() {
  std::vector<RemoteVariable> variables;
  {
    MutexLock lock(mutex_);
    for (const std::string& name : order_) {
      const Remote& r = remote_.at(name);
      variables.push_back({r.variable->spec(), r.slices});
    }
  }
  std::shared_ptr<nn::VariableStore> store =
      gather_variables(clients_, options_.max_message_bytes, variables);
  // This worker's own variables (integer counters); a local step counter that a hook made is
  // the ps tasks' above.
  for (nn::Variable* v : primary().variables()) {
    if (store->find(v->name())) continue;
    store->add(std::shared_ptr<nn::Variable>(std::shared_ptr<void>(), v));
  }
  return store;
}

}  // namespace cadre::ps
