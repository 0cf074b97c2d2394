#include "cadre/checkpoint/manager.h"

#include <glog/logging.h>

#include <cstdio>
#include <random>
#include <set>
#include <string_view>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/background_saver.h"
#include "checkpoint/lease.h"
#include "checkpoint/manifest.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "checkpoint/retention.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

// A fingerprint of everything check_data looks at besides partitions (which always take
// the full check): every name, which slot belongs to which variable, and whether each value
// is defined. 0 when there are partitions. Equal fingerprints mean the check passes as it
// did before, so a run that saves the same model again and again checks it once.
uint32_t names_fingerprint(const CheckpointData& data) {
  if (!data.partitioned_variables.empty()) return 0;
  uint32_t hash = 0;
  auto mix = [&](std::string_view text) {
    hash = crc32c::extend(hash, text.data(), text.size());
    hash = crc32c::extend(hash, "", 1);  // no name ends inside another
  };
  auto mix_tensors = [&](const std::map<std::string, Tensor>& tensors) {
    mix("#");
    for (const auto& [name, value] : tensors) mix(value.defined() ? name : "");
  };
  mix_tensors(data.variables);
  mix_tensors(data.iterator_state);
  mix("#");
  for (const auto& [name, state] : data.rng_states) mix(name);
  mix("#");
  for (const auto& [key, value] : data.attributes) mix(key);
  mix("#");
  for (const auto& [slot, variable] : data.slot_of) {
    mix(slot);
    mix(variable);
  }
  return hash == 0 ? 1 : hash;
}

// Temporaries of saves in flight in another live process (a second chief by mistake, a
// chief restarted while its predecessor still finishes) are left alone: only what a dead
// owner left is removed, and what this process left (it is the model_dir's only writer, so
// an earlier manager's failed save).
void remove_stale_temporaries(Env& env, const std::string& model_dir, const std::string& basename) {
  for (const std::string& name : env.list_dir(model_dir)) {
    bool ours =
        name.starts_with(basename + "-") || name.starts_with(std::string(kStateFileName) + ".");
    if (ours && (temporary_of_this_process(name) || temporary_is_abandoned(env, model_dir, name))) {
      LOG(INFO) << "removing " << name << ", left by an interrupted save";
      env.remove_file(join_path(model_dir, name));
    }
  }
  remove_orphan_parts(env, model_dir, basename);
}

// Writes `data`'s own file with the manifest of its parts at `temporary`, once every part is
// durable.
void write_sharded(const std::string& temporary, const CheckpointData& data,
                   const WriteOptions& options) {
  std::vector<WrittenPart> written;
  for (const CheckpointPart& part : data.parts) {
    auto [bytes, crc] = part.wait();
    written.push_back({bytes, crc});
  }
  internal::write_sharded_checkpoint_file(temporary, data, written, options);
}

}  // namespace

// The saver's side: checks what is saved, writes and publishes it (on the calling thread or
// the background saver's writer) and hands the published file to retention. Private to the
// manager, so its members are open to it.
class CheckpointManager::Impl {
 public:
  Impl(std::string model_dir, CheckpointManagerOptions options);

  std::string start_save(const CheckpointData& data);
  void save_now(const CheckpointData& data);
  std::string checkpoint_path(int64_t global_step) const {
    return join_path(model_dir_, checkpoint_file_name(options_.basename, global_step));
  }

  void warn_going_back(int64_t step, const std::string& path);

  const std::string model_dir_;
  const CheckpointManagerOptions options_;
  const std::shared_ptr<Env> env_;
  std::optional<Retention> retention_;

  // Used by one save at a time (a save waits for the background one before saving itself).
  CheckpointFileWriter file_writer_;
  // The newest checkpoint file model_dir held or this manager saved, and which (saver
  // thread only).
  int64_t newest_step_ = -1;
  std::string newest_path_;
  bool newest_is_ours_ = false;
  // The names of the last data check_data passed (see names_fingerprint).
  uint32_t checked_fingerprint_ = 0;
  // Last: its writer thread calls save_now, so it stops before the rest goes.
  BackgroundSaver background_{[this](const CheckpointData& data) { save_now(data); }};
};

CheckpointManager::Impl::Impl(std::string model_dir, CheckpointManagerOptions options)
    : model_dir_(std::move(model_dir)),
      options_(std::move(options)),
      env_(options_.env ? options_.env : posix_env()) {
  if (model_dir_.empty()) throw InvalidArgumentError("CheckpointManager: model_dir is empty");
  check_name("basename", options_.basename);
  env_->create_dir(model_dir_);
  try {
    remove_stale_temporaries(*env_, model_dir_, options_.basename);
  } catch (const Error& error) {
    // A read-only model_dir is still one to read from; a save there fails on its own.
    LOG(WARNING) << "cannot clean up " << model_dir_ << ": " << error.what();
  }
  for (const auto& [step, path] : list_checkpoint_files(*env_, model_dir_, options_.basename)) {
    newest_step_ = step;
    newest_path_ = path;
  }
  retention_.emplace(env_, model_dir_, options_);
}

std::string CheckpointManager::Impl::start_save(const CheckpointData& data) {
  background_.wait();
  uint32_t fingerprint = names_fingerprint(data);
  if (fingerprint == 0 || fingerprint != checked_fingerprint_) {
    check_data(data);
    checked_fingerprint_ = fingerprint;
  }
  if (data.global_step < 0) {
    throw InvalidArgumentError(
        str_cat("cannot save a checkpoint of global step ", data.global_step, " (negative)"));
  }
  std::string path = checkpoint_path(data.global_step);
  // Saving the newest step again in one run (a planned stop right after a periodic save)
  // goes back nowhere.
  bool again = data.global_step == newest_step_ && newest_is_ours_;
  if (data.global_step <= newest_step_ && !again) warn_going_back(data.global_step, path);
  if (data.global_step >= newest_step_) {
    newest_step_ = data.global_step;
    newest_path_ = path;
    newest_is_ours_ = true;
  }
  return path;
}

// A save at or below the newest step of the model_dir is said, never refused. It happens
// when training went back: its newest checkpoint was damaged or lost (a machine crash), the
// state file named an older one (a crash between publishing and recording, or a person
// rolling back), or a global step was reset. Refusing would turn each of these into a job
// that can never start again (a crash loop) and lose every step trained after; the
// checkpoints at stake are either damaged (nothing to keep), replayed from the same state
// (a synchronous job saves the same values again), or superseded on purpose. What protects
// the user's data is that the newer files are left alone (retention removes them in its
// turn, a save replaces one only at its own step) and that the log names them.
void CheckpointManager::Impl::warn_going_back(int64_t step, const std::string& path) {
  std::string replaces =
      env_->file_exists(path) ? str_cat(", replacing the existing ", path, ",") : "";
  if (step == newest_step_) {
    LOG(WARNING) << "saving a new checkpoint of step " << step << replaces
                 << " which is the newest step in " << model_dir_
                 << ": training went back to an older checkpoint (a newer one was damaged or "
                 << "missing, or the state file named an older one), or the global step was "
                 << "reset";
    return;
  }
  LOG(WARNING) << "saving a checkpoint of step " << step << replaces << " below " << newest_path_
               << " (step " << newest_step_ << "), which stays until a save of its step "
               << "replaces it or retention drops it: training went back to an older "
               << "checkpoint (a newer one was damaged or missing, or the state file named an "
               << "older one), or the global step was reset";
}

void CheckpointManager::Impl::save_now(const CheckpointData& data) {
  std::string name = checkpoint_file_name(options_.basename, data.global_step);
  std::string path = join_path(model_dir_, name);
  std::string temporary = temporary_path_for(path);
  WriteOptions write_options = options_.write_options;
  double now = env_->now_seconds();
  if (write_options.created_unix_seconds == 0) write_options.created_unix_seconds = now;
  write_options.durable = retention_->next_is_durable(now);
  try {
    if (data.parts.empty()) {
      file_writer_.write(temporary, data, write_options);
    } else {
      write_sharded(temporary, data, write_options);
    }
    if (write_options.durable) env_->sync_file(temporary);
    env_->rename_file(temporary, path);
  } catch (...) {
    try {
      env_->remove_file(temporary);
    } catch (const std::exception& error) {
      LOG(WARNING) << "could not remove " << temporary << ": " << error.what();
    }
    throw;
  }
  if (write_options.durable) env_->sync_dir(model_dir_);
  // A checkpoint of this step saved before (training went back) had parts of its own.
  std::set<std::string> parts;
  for (const CheckpointPart& part : data.parts) parts.insert(part.file_name);
  remove_parts(*env_, model_dir_, options_.basename, data.global_step, parts);
  retention_->record(name, now, write_options.durable);
  LOG(INFO) << "saved checkpoint for step " << data.global_step << ": " << path;
}

CheckpointManager::CheckpointManager(std::string model_dir, CheckpointManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model_dir), std::move(options))) {}

CheckpointManager::~CheckpointManager() {
  try {
    wait();
  } catch (const std::exception& error) {
    LOG(ERROR) << "asynchronous checkpoint save in " << impl_->model_dir_
               << " failed: " << error.what();
  }
}

std::string CheckpointManager::save(CheckpointData&& data) {
  const CheckpointManagerOptions& options = impl_->options_;
  if (!options.async_save || !options.copy_in_background) return save(std::as_const(data));
  std::string path = impl_->start_save(data);
  impl_->background_.save_deferred(std::move(data));
  return path;
}

std::string CheckpointManager::save(const CheckpointData& data) {
  std::string path = impl_->start_save(data);
  if (!impl_->options_.async_save) {
    impl_->save_now(data);
  } else if (impl_->options_.copy_in_background) {
    impl_->background_.save_deferred(data);
  } else {
    impl_->background_.save_copy_of(data);
  }
  return path;
}

void CheckpointManager::wait() { impl_->background_.wait(); }

void CheckpointManager::prepare_save() {
  if (impl_->options_.async_save && !impl_->options_.copy_in_background) {
    impl_->background_.warm_next_snapshot();
  }
}

void CheckpointManager::close() {
  wait();
  impl_->retention_->make_newest_durable();
  impl_->retention_->delete_dropped();
}

const std::string& CheckpointManager::model_dir() const { return impl_->model_dir_; }

std::string CheckpointManager::checkpoint_path(int64_t global_step) const {
  return impl_->checkpoint_path(global_step);
}

std::vector<std::string> CheckpointManager::part_file_names(int64_t global_step, int count) const {
  std::random_device random;
  char id[16];
  std::snprintf(id, sizeof(id), "%08x", static_cast<unsigned>(random()));
  std::vector<std::string> names;
  for (int k = 0; k < count; ++k) {
    names.push_back(part_file_name(impl_->options_.basename, global_step, k, count, id));
  }
  return names;
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  return impl_->retention_->checkpoints();
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  return impl_->retention_->latest();
}

std::vector<std::string> CheckpointManager::pending_deletions() const {
  return impl_->retention_->pending_deletions();
}

}  // namespace cadre::checkpoint
