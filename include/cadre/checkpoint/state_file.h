// The `checkpoint` state file in a model_dir, in the text format of TensorFlow's
// CheckpointState protocol buffer, so that TensorFlow-era tools and people recognise it:
//
//   model_checkpoint_path: "model.ckpt-1000.h5"
//   all_model_checkpoint_paths: "model.ckpt-500.h5"
//   all_model_checkpoint_paths: "model.ckpt-1000.h5"
//   all_model_checkpoint_timestamps: 1764000000.5
//   all_model_checkpoint_timestamps: 1764000060.25
//   last_preserved_timestamp: 1763999990
//
// Paths are relative to the model_dir (absolute ones are accepted on reading). The file is
// only ever replaced atomically, after the checkpoints it names are complete (and, for the
// saves CheckpointManagerOptions::durable_every_secs picks, durable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cadre/base/env.h"

namespace cadre::checkpoint {

inline constexpr char kStateFileName[] = "checkpoint";

struct CheckpointState {
  std::string model_checkpoint_path;                    // the latest
  std::vector<std::string> all_model_checkpoint_paths;  // oldest first, the latest last
  std::vector<double> all_model_checkpoint_timestamps;  // creation times, same order
  double last_preserved_timestamp = 0;                  // keep_checkpoint_every_n_hours
};

std::string serialize_state(const CheckpointState& state);
// Throws DataLossError naming `source` and the line when `text` is not a state file.
// Unknown fields are ignored (later versions may add some).
CheckpointState parse_state(std::string_view text, const std::string& source);

// The state of `model_dir`, or nullopt when it has no state file.
std::optional<CheckpointState> read_state(Env& env, const std::string& model_dir);
// Replaces the state file atomically, and durably unless `durable` is false (see
// write_file_atomically).
void write_state(Env& env, const std::string& model_dir, const CheckpointState& state,
                 bool durable = true);

// `path` from a state file as a path usable from here: joined to model_dir when relative.
std::string resolve_checkpoint_path(const std::string& model_dir, const std::string& path);

// "model.ckpt-1000.h5" for (basename "model.ckpt", step 1000), and back: the step of a
// published checkpoint's file name, nullopt for any other name (temporaries included).
std::string checkpoint_file_name(const std::string& basename, int64_t step);
std::optional<int64_t> checkpoint_step(const std::string& file_name, const std::string& basename);

// The published checkpoint files in `model_dir` as (step, path), by step; empty when the
// directory does not exist. Independent of the state file, which may lag behind or list
// fewer (a crash between publishing a file and updating the state).
std::vector<std::pair<int64_t, std::string>> list_checkpoint_files(
    Env& env, const std::string& model_dir, const std::string& basename = "model.ckpt");

// The path of the latest checkpoint of `model_dir`: its state file's, as TensorFlow's
// tf.train.latest_checkpoint, when that file exists; when the state file is missing, empty,
// unparsable or names a file that is gone, the newest existing checkpoint file instead
// (see find_checkpoints in checkpoint/model_dir_checkpoints.h). nullopt when there is none.
// Opens nothing (the file may still be damaged: open_latest_intact checks), logs nothing,
// writes nothing. `env` null: the real one.
std::optional<std::string> latest_checkpoint(const std::string& model_dir, Env* env = nullptr);

}  // namespace cadre::checkpoint
