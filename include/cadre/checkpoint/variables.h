// The bridge between a VariableStore (one replica's variables, or the logical view a
// strategy builds) and checkpoints: what to save, and where to restore.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/nn/variable_store.h"

namespace cadre::checkpoint {

// Adds every variable of `store` to data->variables (handles: nothing is copied) and each
// optimizer slot's relation (VariableSpec::slot_of) to data->slot_of.
void add_variables(const nn::VariableStore& store, CheckpointData* data);

// The store's variables as restore targets (handles to their tensors, written in place)
// and the slot relations among them.
std::map<std::string, Tensor> variable_tensors(const nn::VariableStore& store);
std::map<std::string, std::string> slot_relations(const nn::VariableStore& store);

// restore() for every variable of `store`.
std::vector<std::string> restore_variables(const CheckpointReader& reader,
                                           const nn::VariableStore& store,
                                           const RestoreOptions& options = {});

// Where a variable being created takes its value from: its name in the checkpoint, or
// nullopt to initialise it as usual.
using CheckpointSourceFn = std::function<std::optional<std::string>(const nn::VariableSpec&)>;

// Every variable restored under its own name (resuming, evaluating, predicting).
CheckpointSourceFn same_names();
// TensorFlow's warm start: variables whose whole name matches `options.vars_to_warm_start`
// (renamed per var_name_to_prev_var_name), and with include_slots their optimizer slots,
// come from the checkpoint; the rest are initialised as usual.
CheckpointSourceFn warm_start_names(const WarmStartOptions& options);

// A VariableCreator that restores each variable from `reader` as it is created: models
// create their variables lazily, on the first step, so they are restored then, before any
// use (TensorFlow 2's restore-on-create). The variable is made by `base` and then
// overwritten. A variable that `source` maps to a name the checkpoint lacks, or holds with
// another shape or dtype, throws InvalidArgumentError naming the variable, the file and the
// problem (a checkpoint of another model); nothing is modified but the new variable.
// `verify` checks each dataset's checksum as it is read (DataLossError when damaged).
nn::VariableCreator restoring_creator(std::shared_ptr<const CheckpointReader> reader,
                                      CheckpointSourceFn source, bool verify = true,
                                      nn::VariableCreator base = nn::default_variable_creator);

}  // namespace cadre::checkpoint
