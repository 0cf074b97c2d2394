// What a fit has done so far, as BackupAndRestore keeps it in backup_dir and as the chief
// hands it to the other workers: the global step the fit started at, its epoch numbering,
// the steps per epoch, the learning rate and the history of the epochs done.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cadre/base/env.h"
#include "cadre/keras/callbacks.h"

namespace cadre::keras::internal {

struct FitState {
  int64_t start_step = 0;
  int initial_epoch = 0;
  int64_t steps_per_epoch = 0;
  double learning_rate = 0;
  History history;
};

std::string encode_fit_state(const FitState& state);
// DataLossError naming `source` when the text is not a fit state.
FitState decode_fit_state(const std::string& text, const std::string& source);

inline constexpr char kFitStateFile[] = "fit_state";
// The state in backup_dir, or nullopt when there is none.
std::optional<FitState> read_fit_state(Env& env, const std::string& backup_dir);
// Replaces it atomically (temporary file, sync, rename).
void write_fit_state(Env& env, const std::string& backup_dir, const FitState& state);
void remove_fit_state(Env& env, const std::string& backup_dir);

// Logs as text, and back (how the chief's epoch logs reach every worker).
std::string encode_logs(const Logs& logs);
Logs decode_logs(const std::string& text);

}  // namespace cadre::keras::internal
