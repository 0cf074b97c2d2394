// Restoring checkpoints into a model's tensors: strictly (the whole model), by warm start
// (a chosen subset, possibly renamed), into partitioned variables, and from the newest
// intact checkpoint of a model_dir with fallback to older ones.
//
// Every function checks names, shapes and dtypes of all targets before writing any:
// a checkpoint of another model is reported in one error and changes nothing. Data that
// turns out damaged while reading (bad checksum) throws DataLossError; targets read before
// that point hold the checkpoint's values.
//
// The functions may run concurrently on different targets; a target must not be read or
// written by anyone else while it is being restored.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checkpoint {

// Where (part of) a logical variable is restored to. The tensor is written in place; it
// may live on any device.
struct RestoreTarget {
  Tensor tensor;
  // A partition: `tensor` holds rows [first_row, first_row + tensor.dim(0)) of the logical
  // variable. Otherwise it holds the whole variable.
  bool partition = false;
  int64_t first_row = 0;

  static RestoreTarget whole(Tensor tensor) { return {std::move(tensor), false, 0}; }
  static RestoreTarget rows(Tensor tensor, int64_t first_row) {
    return {std::move(tensor), true, first_row};
  }
};
// Logical name -> its targets: one whole target, or the partitions (which a strict restore
// requires to cover every row).
using RestoreTargets = std::map<std::string, std::vector<RestoreTarget>>;
RestoreTargets whole_targets(const std::map<std::string, Tensor>& tensors);

struct RestoreOptions {
  // Strict: the checkpoint's variables and slots must be exactly the targets. Otherwise
  // variables missing on either side are skipped (shapes and dtypes must still agree).
  bool strict = true;
  bool verify_checksums = true;
};

// Restores every target from `reader`. Throws InvalidArgumentError naming the file and
// listing every missing, unexpected, shape- or dtype-mismatched variable (nothing
// written), or DataLossError for damaged data. Returns the names restored.
std::vector<std::string> restore(const CheckpointReader& reader, const RestoreTargets& targets,
                                 const RestoreOptions& options = {});

struct WarmStartOptions {
  // Which of the targets' variables to warm-start: an ECMAScript regular expression that
  // must match the whole name (TensorFlow's vars_to_warm_start).
  std::string vars_to_warm_start = ".*";
  // Target name -> its name in the checkpoint, for variables that were renamed.
  std::map<std::string, std::string> var_name_to_prev_var_name;
  // Also restore the optimizer slots of warm-started variables (a slot "<var><suffix>" is
  // read from "<previous name of var><suffix>").
  bool include_slots = false;
  bool verify_checksums = true;
};

// Initialises the chosen targets from `reader`; targets not chosen are left alone.
// `slot_of` maps each target that is an optimizer slot to its variable's target name.
// Throws InvalidArgumentError listing every chosen variable (or slot, with include_slots)
// that the checkpoint lacks or holds with another shape or dtype (nothing written).
// Returns the target names written.
std::vector<std::string> warm_start(const CheckpointReader& reader,
                                    const std::map<std::string, Tensor>& targets,
                                    const std::map<std::string, std::string>& slot_of,
                                    const WarmStartOptions& options = {});

// Restores from the newest intact checkpoint of `model_dir`: the state file's latest, then
// every other checkpoint the state file names or model_dir holds, the newest step first. A
// state file that is missing beside checkpoint files, empty, unparsable or naming a file
// that is gone is logged as a warning and the checkpoint files are used (nothing is
// written: the CheckpointManager rewrites the state file). A candidate that is missing,
// truncated or damaged is skipped with a warning naming it and the problem, and the one
// before it is tried. Returns the reader of the checkpoint
// restored (for its step, RNG and iterator state), or nullptr when model_dir holds no
// checkpoint. Throws DataLossError listing every candidate's problem when none is intact,
// and InvalidArgumentError at once for a checkpoint of another model (that is not damage).
std::unique_ptr<CheckpointReader> restore_latest_good(const std::string& model_dir,
                                                      const RestoreTargets& targets,
                                                      const RestoreOptions& options = {},
                                                      Env* env = nullptr,
                                                      const std::string& basename = "model.ckpt");

// Opens the newest checkpoint of `model_dir` whose every checksum verifies, trying the
// candidates as restore_latest_good does (skipping missing or damaged ones with a warning).
// For restoring lazily (see restoring_creator) without checking each read again. Returns
// nullptr when model_dir holds no checkpoint; throws DataLossError listing every
// candidate's problem when none is intact.
std::unique_ptr<CheckpointReader> open_latest_intact(const std::string& model_dir,
                                                     Env* env = nullptr,
                                                     const std::string& basename = "model.ckpt");

}  // namespace cadre::checkpoint
