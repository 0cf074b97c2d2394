#include "strategies/ps/gather.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "cadre/autodiff/tape.h"
#include "core/runtime/in_parallel.h"
#include "strategies/ps/message_budget.h"
#include "strategies/ps/rows.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

// What each ps task holds, by name (dtypes and shapes, no values).
using Listing = std::map<std::string, NamedTensor>;

std::vector<Listing> list_held(const std::vector<std::unique_ptr<PsClient>>& clients) {
  std::vector<Listing> held(clients.size());
  in_parallel(static_cast<int>(clients.size()), [&](int p) {
    ReadResponse listing = clients[static_cast<size_t>(p)]->read(ReadRequest());
    for (const NamedTensor& t : listing.variables()) held[static_cast<size_t>(p)][t.name()] = t;
  });
  return held;
}

// The values of everything `held` lists, read in batches under the message limit
// (message_budget.h).
std::vector<std::map<std::string, Tensor>> read_values(
    const std::vector<std::unique_ptr<PsClient>>& clients, int64_t max_message_bytes,
    const std::vector<Listing>& held) {
  std::vector<std::map<std::string, Tensor>> values(clients.size());
  in_parallel(static_cast<int>(clients.size()), [&](int p) {
    std::vector<const std::string*> names;
    std::vector<int64_t> costs;
    for (const auto& [name, t] : held[static_cast<size_t>(p)]) {
      int64_t size = static_cast<int64_t>(dtype_size(checked_dtype(t.value().dtype(), name)));
      for (int64_t d : t.value().shape()) size *= d;
      names.push_back(&name);
      costs.push_back(item_cost(size, name));
    }
    for (auto [begin, end] : batches(costs, max_batch_bytes(max_message_bytes))) {
      ReadRequest batch;
      for (size_t i = begin; i < end; ++i) batch.add_names(*names[i]);
      ReadResponse response = clients[static_cast<size_t>(p)]->read(batch);
      for (const NamedTensor& t : response.variables()) {
        values[static_cast<size_t>(p)][t.name()] = from_proto(t.value(), t.name());
      }
    }
  });
  return values;
}

// The whole of a variable of `spec`'s shape and dtype from its slices' parts, which are
// values[s.ps] under part_name(s).
template <typename NameOf>
Tensor joined_slices(const nn::VariableSpec& spec, const std::vector<Slice>& slices,
                     const std::vector<std::map<std::string, Tensor>>& values, NameOf part_name) {
  Tensor whole = Tensor::empty(spec.shape, spec.dtype, Device::cpu(0));
  for (const Slice& s : slices) {
    write_rows(whole, values[static_cast<size_t>(s.ps)].at(part_name(s)),
               spec.shape.rank() == 0 ? 0 : s.first_row);
  }
  return whole;
}

void add(nn::VariableStore& store, const nn::VariableSpec& spec, Tensor value) {
  store.add(std::make_shared<nn::Variable>(spec, std::move(value)));
}

// `variable` and its slots: those its first slice has, which every slice has.
void add_variable(nn::VariableStore& store, const RemoteVariable& variable,
                  const std::vector<Listing>& held,
                  const std::vector<std::map<std::string, Tensor>>& values) {
  const nn::VariableSpec& spec = variable.spec;
  nn::VariableSpec logical = spec;
  logical.row_access = false;
  add(store, logical,
      joined_slices(spec, variable.slices, values, [](const Slice& s) { return s.name; }));
  const Slice& first = variable.slices.front();
  for (const auto& [slot_name, t] : held[static_cast<size_t>(first.ps)]) {
    if (t.slot_of() != first.name) continue;
    std::string suffix = slot_name.substr(first.name.size());
    nn::VariableSpec slot;
    slot.name = spec.name + suffix;
    slot.shape = spec.shape;
    slot.dtype = spec.dtype;
    slot.trainable = false;
    slot.slot_of = spec.name;
    add(store, slot, joined_slices(spec, variable.slices, values, [&](const Slice& s) {
          return s.name + suffix;
        }));
  }
}

// Each optimizer's step counter, the largest any ps task holds.
void add_iterations(nn::VariableStore& store, const std::set<std::string>& variable_names,
                    const std::vector<Listing>& held,
                    const std::vector<std::map<std::string, Tensor>>& values) {
  std::map<std::string, int64_t> iterations;
  for (size_t p = 0; p < values.size(); ++p) {
    for (const auto& [name, value] : values[p]) {
      if (!name.ends_with("/iterations") || held[p].at(name).slot_of() != "") continue;
      if (variable_names.count(name)) continue;
      iterations[name] = std::max(iterations[name], value.item<int64_t>());
    }
  }
  for (const auto& [name, v] : iterations) {
    nn::VariableSpec spec;
    spec.name = name;
    spec.shape = Shape{};
    spec.dtype = DType::kInt64;
    spec.trainable = false;
    add(store, spec, Tensor::scalar<int64_t>(v));
  }
}

}  // namespace

std::shared_ptr<nn::VariableStore> gather_variables(
    const std::vector<std::unique_ptr<PsClient>>& clients, int64_t max_message_bytes,
    const std::vector<RemoteVariable>& variables) {
  NoGradScope no_grad;
  std::vector<Listing> held = list_held(clients);
  std::vector<std::map<std::string, Tensor>> values = read_values(clients, max_message_bytes, held);
  auto store = std::make_shared<nn::VariableStore>();
  std::set<std::string> names;
  for (const RemoteVariable& variable : variables) {
    add_variable(*store, variable, held, values);
    names.insert(variable.spec.name);
  }
  add_iterations(*store, names, held, values);
  return store;
}

}  // namespace cadre::ps
