// Which checkpoints a model_dir holds, in the order a reader tries them, whatever shape its
// `checkpoint` state file is in. The state file is a single point of failure otherwise: a
// machine crash can leave it empty or garbled, a full disk can leave the checkpoint without
// it, and a lost unsynced checkpoint leaves it naming a file that is gone. The published
// files (model.ckpt-<step>.h5, complete once named so) say the rest.
//
// Readers (restore, the evaluator, cadre_ckpt) heal in memory only; the model_dir's one
// writer, its CheckpointManager, also rewrites the state file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/checkpoint/state_file.h"

namespace cadre::checkpoint {

struct ModelDirCheckpoints {
  // The state file, when it parses.
  std::optional<CheckpointState> state;
  // What is wrong with the state file, in a sentence naming it: missing beside checkpoint
  // files, empty, unparsable, or naming a latest checkpoint that does not exist. Empty when
  // it can be trusted, and when model_dir holds neither a state file nor a checkpoint.
  std::string state_problem;
  // Paths in the order to try them: the state file's latest first (TensorFlow's rule, which
  // also lets a person roll back by editing the file), then every other checkpoint the state
  // file names or model_dir holds, the newest step first. Includes named files that do not
  // exist (opening them says so).
  std::vector<std::string> candidates;
};

// Whether `path` names a checkpoint that is there: a file, or a TensorFlow checkpoint's
// prefix (PREFIX.index exists), as TensorFlow's state files name them.
bool checkpoint_exists(Env& env, const std::string& path);

// Reads model_dir's state file and lists its published checkpoint files; never writes.
// Throws only the Env's errors other than NotFoundError (model_dir may be missing).
ModelDirCheckpoints find_checkpoints(Env& env, const std::string& model_dir,
                                     const std::string& basename = "model.ckpt");

// The state file to write in place of the one find_checkpoints found at fault: the newest
// intact checkpoint (every checksum verified, newest first as open_latest_intact tries them)
// as the latest, after the newest `keep_checkpoint_max` - 1 older checkpoint files (all of
// them for 0), with the timestamps `found.state` recorded or else the files' modification
// times. Newer files, which failed the check, and older ones beyond that number (they may be
// kept on purpose) are left out, so that retention never deletes them. nullopt when
// model_dir holds no checkpoint, or no intact one (logged as an error: a person should look).
// Never writes.
std::optional<CheckpointState> rebuilt_state(Env& env, const std::string& model_dir,
                                             const ModelDirCheckpoints& found,
                                             int keep_checkpoint_max,
                                             const std::string& basename = "model.ckpt");

}  // namespace cadre::checkpoint
