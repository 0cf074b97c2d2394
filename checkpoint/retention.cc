#include "checkpoint/retention.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "cadre/base/errors.h"
#include "checkpoint/lease.h"
#include "checkpoint/model_dir_checkpoints.h"

namespace cadre::checkpoint {

Retention::Retention(std::shared_ptr<Env> env, std::string model_dir,
                     const CheckpointManagerOptions& options)
    : env_(std::move(env)),
      model_dir_(std::move(model_dir)),
      basename_(options.basename),
      keep_checkpoint_max_(options.keep_checkpoint_max),
      keep_every_secs_(options.keep_checkpoint_every_n_hours * 3600.0),
      durable_every_secs_(options.durable_every_secs) {
  // A state file at fault is rebuilt from the checkpoint files, so that training resumes
  // from the newest intact one instead of failing or starting over, and so that retention
  // goes on.
  ModelDirCheckpoints found = find_checkpoints(*env_, model_dir_, basename_);
  std::optional<CheckpointState> state = found.state;
  bool rebuilt = !found.state_problem.empty();
  if (rebuilt) state = rebuilt_state(*env_, model_dir_, found, keep_checkpoint_max_, basename_);
  if (rebuilt && state) {
    try {
      write_state(*env_, model_dir_, *state);
      LOG(WARNING) << found.state_problem << "; rewrote it naming " << state->model_checkpoint_path
                   << ", the newest intact checkpoint, and "
                   << state->all_model_checkpoint_paths.size() - 1 << " older one(s)";
    } catch (const Error& error) {
      LOG(WARNING) << found.state_problem << "; cannot rewrite it (" << error.what()
                   << "): readers use the checkpoint files until a save rewrites it";
    }
  }
  {
    MutexLock lock(mutex_);
    last_preserved_timestamp_ = env_->now_seconds();
    pending_ = read_pending_deletions(*env_, model_dir_);
  }
  if (state) load(*state, rebuilt);
  // What an earlier manager could not delete, and what a dead reader's lease kept.
  try {
    delete_unleased({});
  } catch (const Error& error) {
    LOG(WARNING) << "cannot delete the checkpoints retention dropped earlier in " << model_dir_
                 << " (retried at the next save): " << error.what();
  }
}

void Retention::load(const CheckpointState& state, bool rebuilt) {
  std::string newest;
  {
    MutexLock lock(mutex_);
    for (size_t i = 0; i < state.all_model_checkpoint_paths.size(); ++i) {
      double timestamp = i < state.all_model_checkpoint_timestamps.size()
                             ? state.all_model_checkpoint_timestamps[i]
                             : env_->now_seconds();
      entries_.push_back({state.all_model_checkpoint_paths[i], timestamp});
    }
    if (state.last_preserved_timestamp != 0) {
      last_preserved_timestamp_ = state.last_preserved_timestamp;
    }
    // Newer files than a rebuilt state's latest failed the check: not to be adopted.
    if (!rebuilt) adopt_unrecorded_checkpoints();
    if (!entries_.empty()) newest = entries_.back().name;
  }
  // The newest checkpoint of an earlier manager is the durable one to keep (that manager
  // may have been killed before it made it durable).
  if (newest.empty()) return;
  try {
    std::string path = join_path(model_dir_, newest);
    // A TensorFlow checkpoint the model_dir started from is named by its prefix.
    if (!env_->file_exists(path) && env_->file_exists(path + ".index")) path += ".index";
    env_->sync_file(path);
    MutexLock lock(mutex_);
    durable_ = newest;
    durable_timestamp_ = env_->now_seconds();
  } catch (const std::exception& error) {
    LOG(WARNING) << "could not make " << newest << " durable: " << error.what();
  }
}

void Retention::adopt_unrecorded_checkpoints() {
  // A save interrupted between publishing its file and updating the state file leaves a
  // complete checkpoint newer than every recorded one. Retention takes it over so that it
  // is not left behind forever. Older unrecorded files may be kept on purpose
  // (keep_checkpoint_every_n_hours) and are left alone, and so is everything when there is
  // no state file (files this manager has no record of at all).
  int64_t newest = -1;
  for (const Entry& entry : entries_) {
    newest = std::max(newest, checkpoint_step(entry.name, basename_).value_or(-1));
  }
  for (const auto& [step, path] : list_checkpoint_files(*env_, model_dir_, basename_)) {
    if (step <= newest) continue;
    LOG(INFO) << "adopting " << path << ", published by a save that did not record it";
    entries_.push_back({base_name(path), env_->now_seconds()});
  }
}

bool Retention::next_is_durable(double now) const {
  MutexLock lock(mutex_);
  return durable_every_secs_ <= 0 || durable_.empty() ||
         now - durable_timestamp_ >= durable_every_secs_;
}

void Retention::record(const std::string& name, double now, bool durable) {
  std::vector<std::string> to_delete;
  CheckpointState state;
  {
    MutexLock lock(mutex_);
    std::erase_if(entries_, [&](const Entry& entry) { return entry.name == name; });
    entries_.push_back({name, now});
    if (durable) {
      durable_ = name;
      durable_timestamp_ = now;
    }
    apply_retention(&to_delete);
    state = state_to_write();
  }
  // Synced only with a durable checkpoint: after a crash of the machine, any state written
  // since names that one (retention keeps it), and one that is lost or damaged makes
  // restore_latest_good list the files instead.
  write_state(*env_, model_dir_, state, durable);
  // The state file no longer names them: deleting is now safe for readers of the state.
  delete_unleased(std::move(to_delete));
}

void Retention::make_newest_durable() {
  std::string newest;
  {
    MutexLock lock(mutex_);
    if (entries_.empty() || entries_.back().name == durable_) return;
    newest = entries_.back().name;
  }
  env_->sync_file(join_path(model_dir_, newest));
  env_->sync_dir(model_dir_);
  std::vector<std::string> to_delete;
  CheckpointState state;
  {
    MutexLock lock(mutex_);
    durable_ = newest;
    durable_timestamp_ = env_->now_seconds();
    apply_retention(&to_delete);  // the durable one before may go now
    state = state_to_write();
  }
  write_state(*env_, model_dir_, state);
  delete_unleased(std::move(to_delete));
}

CheckpointState Retention::state_to_write() const {
  CheckpointState state;
  state.model_checkpoint_path = entries_.back().name;
  for (const Entry& entry : entries_) {
    state.all_model_checkpoint_paths.push_back(entry.name);
    state.all_model_checkpoint_timestamps.push_back(entry.timestamp);
  }
  state.last_preserved_timestamp = last_preserved_timestamp_;
  return state;
}

void Retention::apply_retention(std::vector<std::string>* to_delete) {
  if (keep_checkpoint_max_ <= 0) return;
  const auto max = static_cast<size_t>(keep_checkpoint_max_);
  while (true) {
    // The newest `max` stay, and the durable one besides them while none of them is
    // durable; the oldest of the others goes.
    bool durable_besides = false;
    for (size_t i = 0; i + max < entries_.size(); ++i) {
      durable_besides = durable_besides || entries_[i].name == durable_;
    }
    if (entries_.size() <= max + (durable_besides ? 1 : 0)) break;
    auto victim = entries_.begin();
    if (victim->name == durable_) ++victim;
    Entry oldest = *victim;
    entries_.erase(victim);
    if (keep_every_secs_ > 0 && oldest.timestamp - keep_every_secs_ >= last_preserved_timestamp_) {
      last_preserved_timestamp_ = oldest.timestamp;
      LOG(INFO) << "keeping checkpoint " << oldest.name
                << " for good (keep_checkpoint_every_n_hours)";
      continue;
    }
    to_delete->push_back(oldest.name);
  }
}

void Retention::delete_unleased(std::vector<std::string> names) {
  MutexLock lock(deleting_);
  std::vector<std::string> before;
  {
    MutexLock state(mutex_);
    before = pending_;
  }
  names.insert(names.begin(), before.begin(), before.end());
  std::vector<std::string> still = delete_unleased_checkpoints(*env_, model_dir_, names, basename_);
  remove_stale_leases(*env_, model_dir_, /*grace_seconds=*/3600);
  if (still != before) {
    try {
      write_pending_deletions(*env_, model_dir_, still);
    } catch (const std::exception& error) {
      // The list is what a reader or a later manager catches up from; this manager retries.
      LOG(WARNING) << "could not record the checkpoints retention still has to delete: "
                   << error.what();
    }
  }
  MutexLock state(mutex_);
  pending_ = std::move(still);
}

std::vector<std::string> Retention::checkpoints() const {
  MutexLock lock(mutex_);
  std::vector<std::string> paths;
  for (const Entry& entry : entries_) paths.push_back(join_path(model_dir_, entry.name));
  return paths;
}

std::optional<std::string> Retention::latest() const {
  MutexLock lock(mutex_);
  if (entries_.empty()) return std::nullopt;
  return join_path(model_dir_, entries_.back().name);
}

std::vector<std::string> Retention::pending_deletions() const {
  MutexLock lock(mutex_);
  std::vector<std::string> paths;
  for (const std::string& name : pending_) paths.push_back(join_path(model_dir_, name));
  return paths;
}

}  // namespace cadre::checkpoint
