#include "strategies/ps/optimizer_table.h"

#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "strategies/ps/optimizer_proto.h"

namespace cadre::ps {
namespace {

// The config in a canonical order: protobuf serialises maps in any order, and workers must
// be recognised as using the same optimizer.
std::string canonical(const nn::OptimizerConfig& parsed) {
  std::string config = parsed.kind;
  for (const auto& [key, value] : parsed.numbers) config += str_cat(";", key, "=", value);
  if (parsed.schedule) {
    config += str_cat(";schedule=", parsed.schedule->kind);
    for (const auto& [key, value] : parsed.schedule->numbers) {
      config += str_cat(";", key, "=", value);
    }
    for (const auto& [key, values] : parsed.schedule->lists) {
      config += str_cat(";", key, "=[", join(values), "]");
    }
  }
  return config;
}

}  // namespace

OptimizerState& OptimizerTable::find_or_make(const OptimizerSpec& spec) {
  nn::OptimizerConfig parsed = from_proto(spec);
  std::string config = canonical(parsed);
  if (auto known = names_.find(config); known != names_.end()) return by_name_.at(known->second);
  std::shared_ptr<nn::Optimizer> made = nn::optimizer_from_config(parsed);
  OptimizerState& state = by_name_[made->name()];
  names_[config] = made->name();
  state.config = config;
  state.optimizer = made;
  return state;
}

OptimizerState* OptimizerTable::find(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

}  // namespace cadre::ps
