#include "cadre/checkpoint/variables.h"

#include <regex>

#include "cadre/base/errors.h"
#include "checkpoint/restore_rows.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {

void add_variables(const nn::VariableStore& store, CheckpointData* data) {
  for (nn::Variable* variable : store.variables()) {
    data->variables[variable->name()] = variable->tensor();
    if (!variable->spec().slot_of.empty()) {
      data->slot_of[variable->name()] = variable->spec().slot_of;
    }
  }
}

std::map<std::string, Tensor> variable_tensors(const nn::VariableStore& store) {
  std::map<std::string, Tensor> tensors;
  for (nn::Variable* variable : store.variables()) tensors[variable->name()] = variable->tensor();
  return tensors;
}

std::map<std::string, std::string> slot_relations(const nn::VariableStore& store) {
  std::map<std::string, std::string> relations;
  for (nn::Variable* variable : store.variables()) {
    if (!variable->spec().slot_of.empty()) relations[variable->name()] = variable->spec().slot_of;
  }
  return relations;
}

std::vector<std::string> restore_variables(const CheckpointReader& reader,
                                           const nn::VariableStore& store,
                                           const RestoreOptions& options) {
  return restore(reader, whole_targets(variable_tensors(store)), options);
}

CheckpointSourceFn same_names() {
  return [](const nn::VariableSpec& spec) -> std::optional<std::string> { return spec.name; };
}

CheckpointSourceFn warm_start_names(const WarmStartOptions& options) {
  std::regex pattern;
  try {
    pattern = std::regex(options.vars_to_warm_start, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InvalidArgumentError(str_cat("warm start: vars_to_warm_start '",
                                       options.vars_to_warm_start,
                                       "' is not a valid regular expression: ", e.what()));
  }
  auto previous = [renames = options.var_name_to_prev_var_name](const std::string& name) {
    auto it = renames.find(name);
    return it == renames.end() ? name : it->second;
  };
  return [pattern, previous, include_slots = options.include_slots](
             const nn::VariableSpec& spec) -> std::optional<std::string> {
    if (spec.slot_of.empty()) {
      if (!std::regex_match(spec.name, pattern)) return std::nullopt;
      return previous(spec.name);
    }
    // A slot "<var><suffix>" follows its variable, read from "<previous var><suffix>".
    if (!include_slots || !std::regex_match(spec.slot_of, pattern)) return std::nullopt;
    if (spec.name.compare(0, spec.slot_of.size(), spec.slot_of) != 0) return std::nullopt;
    return previous(spec.slot_of) + spec.name.substr(spec.slot_of.size());
  };
}

nn::VariableCreator restoring_creator(std::shared_ptr<const CheckpointReader> reader,
                                      CheckpointSourceFn source, bool verify,
                                      nn::VariableCreator base) {
  return [reader = std::move(reader), source = std::move(source), verify, base = std::move(base)](
             const nn::VariableSpec& spec, uint64_t seed) -> std::shared_ptr<nn::Variable> {
    std::optional<std::string> from = source(spec);
    if (!from) return base(spec, seed);
    restorable(*reader, spec, *from);
    std::shared_ptr<nn::Variable> variable = base(spec, seed);
    reader->read_into(*from, variable->tensor(), verify);
    return variable;
  };
}

}  // namespace cadre::checkpoint
