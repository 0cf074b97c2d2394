#include "cadre/checkpoint/manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/nn/deferred_copy.h"
#include "checkpoint/lease.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"
#include "core/runtime/background_thread.h"

namespace cadre::checkpoint {
namespace {

template <typename Map>
const typename Map::mapped_type* find_in(const Map* map, const typename Map::key_type& key) {
  if (map == nullptr) return nullptr;
  auto it = map->find(key);
  return it == map->end() ? nullptr : &it->second;
}

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

// The copy of `data`'s tensors into host memory: each tensor is replaced by its copy, made
// into the tensor of the same name in `old` (an earlier snapshot nobody uses any more)
// when it fits. That spares the allocation and the page faults of fresh memory, which
// cost more than the copy itself. `data` and `old` must outlive the copy.
std::shared_ptr<nn::DeferredCopy> host_copy_of(CheckpointData& data, const CheckpointData* old) {
  struct Origin {
    const std::string* name;
    int part;  // -1: a whole variable; -2: an iterator tensor
  };
  std::vector<Tensor*> tensors;
  std::vector<Origin> origins;
  for (auto& [name, value] : data.variables) {
    tensors.push_back(&value);
    origins.push_back({&name, -1});
  }
  for (auto& [name, parts] : data.partitioned_variables) {
    for (size_t i = 0; i < parts.size(); ++i) {
      tensors.push_back(&parts[i]);
      origins.push_back({&name, static_cast<int>(i)});
    }
  }
  for (auto& [name, value] : data.iterator_state) {
    tensors.push_back(&value);
    origins.push_back({&name, -2});
  }
  if (old == nullptr) return std::make_shared<nn::DeferredCopy>(std::move(tensors));
  auto memory_for = [old, origins = std::move(origins)](size_t i) -> Tensor {
    const Origin& o = origins[i];
    const Tensor* found = nullptr;
    if (o.part == -1) {
      found = find_in(&old->variables, *o.name);
    } else if (o.part == -2) {
      found = find_in(&old->iterator_state, *o.name);
    } else if (const auto* parts = find_in(&old->partitioned_variables, *o.name)) {
      if (static_cast<size_t>(o.part) < parts->size()) found = &(*parts)[o.part];
    }
    return found ? *found : Tensor();
  };
  return std::make_shared<nn::DeferredCopy>(std::move(tensors), std::move(memory_for));
}

CheckpointData copy_to_host(const CheckpointData& data, const CheckpointData* reuse) {
  CheckpointData copy = data;
  std::shared_ptr<nn::DeferredCopy> copies = host_copy_of(copy, reuse);
  copies->run();
  if (copies->error()) std::rethrow_exception(copies->error());
  return copy;
}

}  // namespace

CheckpointData copy_to_host(const CheckpointData& data) { return copy_to_host(data, nullptr); }

CheckpointManager::CheckpointManager(std::string model_dir, CheckpointManagerOptions options)
    : model_dir_(std::move(model_dir)),
      options_(std::move(options)),
      env_(options_.env ? options_.env : posix_env()) {
  if (model_dir_.empty()) throw InvalidArgumentError("CheckpointManager: model_dir is empty");
  check_name("basename", options_.basename);
  env_->create_dir(model_dir_);
  try {
    remove_stale_temporaries();
  } catch (const Error& error) {
    // A read-only model_dir is still one to read from; a save there fails on its own.
    LOG(WARNING) << "cannot clean up " << model_dir_ << ": " << error.what();
  }
  for (const auto& [step, path] : list_checkpoint_files(*env_, model_dir_, options_.basename)) {
    newest_step_ = step;
    newest_path_ = path;
  }
  // A state file at fault (missing beside checkpoints, empty, garbled, naming a file that is
  // gone) is rebuilt from the checkpoint files, so that training resumes from the newest
  // intact one instead of failing or starting over, and so that retention goes on.
  ModelDirCheckpoints found = find_checkpoints(*env_, model_dir_, options_.basename);
  std::optional<CheckpointState> state = found.state;
  std::optional<CheckpointState> rebuilt;
  if (!found.state_problem.empty()) {
    rebuilt = rebuilt_state(*env_, model_dir_, found, options_.keep_checkpoint_max,
                            options_.basename);
    state = rebuilt;
  }
  if (rebuilt) {
    try {
      write_state(*env_, model_dir_, *rebuilt);
      LOG(WARNING) << found.state_problem << "; rewrote it naming "
                   << rebuilt->model_checkpoint_path << ", the newest intact checkpoint, and "
                   << rebuilt->all_model_checkpoint_paths.size() - 1 << " older one(s)";
    } catch (const Error& error) {
      LOG(WARNING) << found.state_problem << "; cannot rewrite it (" << error.what()
                   << "): readers use the checkpoint files until a save rewrites it";
    }
  }
  MutexLock lock(mutex_);
  last_preserved_timestamp_ = env_->now_seconds();
  if (state) {
    for (size_t i = 0; i < state->all_model_checkpoint_paths.size(); ++i) {
      double timestamp = i < state->all_model_checkpoint_timestamps.size()
                             ? state->all_model_checkpoint_timestamps[i]
                             : env_->now_seconds();
      entries_.push_back({state->all_model_checkpoint_paths[i], timestamp});
    }
    if (state->last_preserved_timestamp != 0) {
      last_preserved_timestamp_ = state->last_preserved_timestamp;
    }
    // Newer files than a rebuilt state's latest failed the check: not to be adopted.
    if (!rebuilt) adopt_unrecorded_checkpoints();
  }
  pending_ = read_pending_deletions(*env_, model_dir_);
  std::string newest = entries_.empty() ? "" : entries_.back().name;
  lock.unlock();
  // The newest checkpoint of an earlier manager is the durable one to keep (that manager
  // may have been killed before it made it durable).
  if (!newest.empty()) {
    try {
      env_->sync_file(join_path(model_dir_, newest));
      MutexLock durable(mutex_);
      durable_ = newest;
      durable_timestamp_ = env_->now_seconds();
    } catch (const std::exception& error) {
      LOG(WARNING) << "could not make " << newest << " durable: " << error.what();
    }
  }
  // What an earlier manager could not delete, and what a dead reader's lease kept.
  try {
    delete_unleased({});
  } catch (const Error& error) {
    LOG(WARNING) << "cannot delete the checkpoints retention dropped earlier in " << model_dir_
                 << " (retried at the next save): " << error.what();
  }
}

void CheckpointManager::adopt_unrecorded_checkpoints() {
  // A save interrupted between publishing its file and updating the state file leaves a
  // complete checkpoint newer than every recorded one. Retention takes it over so that it
  // is not left behind forever. Older unrecorded files may be kept on purpose
  // (keep_checkpoint_every_n_hours) and are left alone, and so is everything when there is
  // no state file (files this manager has no record of at all).
  int64_t newest = -1;
  for (const Entry& entry : entries_) {
    newest = std::max(newest, checkpoint_step(entry.name, options_.basename).value_or(-1));
  }
  for (const auto& [step, path] : list_checkpoint_files(*env_, model_dir_, options_.basename)) {
    if (step <= newest) continue;
    LOG(INFO) << "adopting " << path << ", published by a save that did not record it";
    entries_.push_back({base_name(path), env_->now_seconds()});
  }
}

CheckpointManager::~CheckpointManager() {
  try {
    wait();
  } catch (const std::exception& error) {
    LOG(ERROR) << "asynchronous checkpoint save in " << model_dir_ << " failed: " << error.what();
  }
  {
    MutexLock lock(writer_mutex_);
    stopping_ = true;
  }
  writer_changed_.notify_all();
  copy_requested_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (copier_.joinable()) copier_.join();
}

std::string CheckpointManager::checkpoint_path(int64_t global_step) const {
  return join_path(model_dir_, checkpoint_file_name(options_.basename, global_step));
}

// The writer is a background thread (see make_background_thread) at nice +10. Under the
// default policy, even at nice +10, the kernel (EEVDF, 6.x) let it preempt the training
// thread on a busy core and run the whole write (2.5 ms of a 2-thread MLP's step) there.
// Now it waits for the end of a time slice and then takes the CPU in short turns, about a
// tenth of a busy core, enough to write a save long before the next one.
constexpr int kWriterNiceness = 10;

// One thread writes every asynchronous save (a thread per save would cost its creation
// on the training thread each time).
void CheckpointManager::write_in_background() {
  make_background_thread("cadre-ckpt-wr", kWriterNiceness);
  MutexLock lock(writer_mutex_);
  while (true) {
    // A queued save whose copy is still being made waits for the copier.
    writer_changed_.wait(writer_mutex_, [&]() CADRE_REQUIRES(writer_mutex_) {
      return stopping_ || (queued_ != nullptr && copy_ == nullptr) || to_warm_ != nullptr;
    });
    if (to_warm_ != nullptr && !stopping_) {
      std::shared_ptr<const CheckpointData> snapshot = std::move(to_warm_);
      to_warm_ = nullptr;
      warming_ = true;
      lock.unlock();
      // Writing brings the lines into this core's cache and the shared one; the save's
      // copy then finds them there instead of in memory.
      auto touch = [](Tensor memory) {
        if (memory.device().is_cpu() && memory.is_contiguous()) {
          std::memset(memory.raw_data(), 0, memory.nbytes());
        }
      };
      for (const auto& [name, value] : snapshot->variables) touch(value);
      for (const auto& [name, parts] : snapshot->partitioned_variables) {
        for (const Tensor& part : parts) touch(part);
      }
      lock.lock();
      warming_ = false;
      writer_changed_.notify_all();
      continue;
    }
    if (queued_ == nullptr) return;  // stopping, nothing left to write
    std::shared_ptr<const CheckpointData> data = queued_;
    std::exception_ptr failure = std::move(copy_failure_);
    copy_failure_ = nullptr;
    lock.unlock();
    try {
      if (!failure) save_now(*data);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    queued_ = nullptr;
    if (failure) failure_ = failure;
    writer_changed_.notify_all();
  }
}

// A background thread too, but at the caller's niceness, unlike the writer: the caller's
// next write of a variable waits for whatever part of the copy this thread has started,
// and gives up its core while it waits. Woken on a busy core, the copier no longer
// preempts the caller (a context switch, and its cache); the caller's next write then
// takes over the copy unless an idle core ran it first. It also lets go of the snapshot
// before, so that the caller does not spend its time freeing it.
void CheckpointManager::copy_in_background() {
  make_background_thread("cadre-ckpt-cp", 0);
  MutexLock lock(writer_mutex_);
  while (true) {
    copy_requested_.wait(writer_mutex_, [&]() CADRE_REQUIRES(writer_mutex_) {
      return stopping_ || (copy_ != nullptr && !copy_started_);
    });
    if (copy_ == nullptr || copy_started_) return;  // stopping
    copy_started_ = true;
    std::shared_ptr<nn::DeferredCopy> copy = copy_;
    std::shared_ptr<const CheckpointData> retired = std::move(retired_);
    retired_ = nullptr;
    lock.unlock();
    copy->run();
    retired.reset();
    lock.lock();
    copy_failure_ = copy->error();
    copy_ = nullptr;  // let go of the variables' buffers; the writer may go on
    writer_changed_.notify_all();
  }
}

// Publishes a copy of `data`'s tensors into host memory, made by the copier thread or by
// a writer of variables, and queues it for the writer. Finding the last snapshot's memory
// to copy into (the writer is done with it) is left to the copying thread, as is freeing
// that snapshot (the copier's): this thread only collects the tensors.
void CheckpointManager::queue_with_deferred_copy(CheckpointData data) {
  if (!copier_.joinable()) copier_ = std::thread([this] { copy_in_background(); });
  if (!writer_.joinable()) writer_ = std::thread([this] { write_in_background(); });
  auto snapshot = std::make_shared<CheckpointData>(std::move(data));
  // The last snapshot stays alive until the copier has run the copy.
  std::shared_ptr<nn::DeferredCopy> copy = host_copy_of(*snapshot, snapshot_.get());
  nn::defer_copy(copy);
  {
    MutexLock lock(writer_mutex_);
    copy_ = copy;
    copy_started_ = false;
    queued_ = snapshot;
    retired_ = std::move(snapshot_);
  }
  snapshot_ = std::move(snapshot);
  // Only the copier: a wake-up costs the caller a system call (and a hypervisor exit in a
  // virtual machine); the copier wakes the writer when the copy is done.
  copy_requested_.notify_one();
}

void CheckpointManager::prepare_save() {
  if (!options_.async_save || options_.copy_in_background || snapshot_ == nullptr) return;
  {
    MutexLock lock(writer_mutex_);
    if (queued_ != nullptr || warming_) return;
    to_warm_ = snapshot_;
  }
  writer_changed_.notify_all();
}

void CheckpointManager::close() {
  wait();
  make_newest_durable();
  delete_unleased({});
}

void CheckpointManager::make_newest_durable() {
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

void CheckpointManager::wait() {
  MutexLock lock(writer_mutex_);
  writer_changed_.wait(writer_mutex_,
                       [&]() CADRE_REQUIRES(writer_mutex_) { return queued_ == nullptr; });
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

std::string CheckpointManager::start_save(const CheckpointData& data) {
  wait();
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
void CheckpointManager::warn_going_back(int64_t step, const std::string& path) {
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

std::string CheckpointManager::save(CheckpointData&& data) {
  if (!options_.async_save || !options_.copy_in_background) return save(std::as_const(data));
  std::string path = start_save(data);
  queue_with_deferred_copy(std::move(data));
  return path;
}

std::string CheckpointManager::save(const CheckpointData& data) {
  std::string path = start_save(data);
  if (!options_.async_save) {
    save_now(data);
    return path;
  }
  if (options_.copy_in_background) {
    queue_with_deferred_copy(data);
    return path;
  }
  // The previous save is done (wait() above): its snapshot's memory is free to copy into,
  // unless the writer is still warming it. The writer runs at a low priority and may not
  // even have started: this thread does not wait for it (it would wait for a whole time
  // slice of the busy cores) but takes it back, or copies into new memory.
  bool reuse = true;
  {
    MutexLock lock(writer_mutex_);
    to_warm_ = nullptr;
    reuse = !warming_;
  }
  auto copy = std::make_shared<const CheckpointData>(
      copy_to_host(data, reuse ? snapshot_.get() : nullptr));
  snapshot_ = copy;
  {
    MutexLock lock(writer_mutex_);
    queued_ = copy;
  }
  if (!writer_.joinable()) writer_ = std::thread([this] { write_in_background(); });
  writer_changed_.notify_all();
  return path;
}

void CheckpointManager::save_now(const CheckpointData& data) {
  std::string name = checkpoint_file_name(options_.basename, data.global_step);
  std::string path = join_path(model_dir_, name);
  std::string temporary = temporary_path_for(path);
  WriteOptions write_options = options_.write_options;
  double now = env_->now_seconds();
  if (write_options.created_unix_seconds == 0) write_options.created_unix_seconds = now;
  {
    MutexLock lock(mutex_);
    write_options.durable = options_.durable_every_secs <= 0 || durable_.empty() ||
                            now - durable_timestamp_ >= options_.durable_every_secs;
  }
  try {
    file_writer_.write(temporary, data, write_options);
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

  std::vector<std::string> to_delete;
  CheckpointState state;
  {
    MutexLock lock(mutex_);
    std::erase_if(entries_, [&](const Entry& entry) { return entry.name == name; });
    entries_.push_back({name, now});
    if (write_options.durable) {
      durable_ = name;
      durable_timestamp_ = now;
    }
    apply_retention(&to_delete);
    state = state_to_write();
  }
  // Synced only with a durable checkpoint: after a crash of the machine, any state written
  // since names that one (retention keeps it), and one that is lost or damaged makes
  // restore_latest_good list the files instead.
  write_state(*env_, model_dir_, state, write_options.durable);
  LOG(INFO) << "saved checkpoint for step " << data.global_step << ": " << path;
  // The state file no longer names them: deleting is now safe for readers of the state.
  delete_unleased(std::move(to_delete));
}

CheckpointState CheckpointManager::state_to_write() const {
  CheckpointState state;
  state.model_checkpoint_path = entries_.back().name;
  for (const Entry& entry : entries_) {
    state.all_model_checkpoint_paths.push_back(entry.name);
    state.all_model_checkpoint_timestamps.push_back(entry.timestamp);
  }
  state.last_preserved_timestamp = last_preserved_timestamp_;
  return state;
}

void CheckpointManager::apply_retention(std::vector<std::string>* to_delete) {
  if (options_.keep_checkpoint_max <= 0) return;
  const double every = options_.keep_checkpoint_every_n_hours * 3600.0;
  const auto max = static_cast<size_t>(options_.keep_checkpoint_max);
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
    if (every > 0 && oldest.timestamp - every >= last_preserved_timestamp_) {
      last_preserved_timestamp_ = oldest.timestamp;
      LOG(INFO) << "keeping checkpoint " << oldest.name
                << " for good (keep_checkpoint_every_n_hours)";
      continue;
    }
    to_delete->push_back(oldest.name);
  }
}

void CheckpointManager::delete_unleased(std::vector<std::string> names) {
  MutexLock lock(deleting_);
  std::vector<std::string> before;
  {
    MutexLock state(mutex_);
    before = pending_;
  }
  names.insert(names.begin(), before.begin(), before.end());
  std::vector<std::string> still = delete_unleased_checkpoints(*env_, model_dir_, names,
                                                               options_.basename);
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

// Temporaries of saves in flight in another live process (a second chief by mistake, a
// chief restarted while its predecessor still finishes) are left alone: only what a dead
// owner left is removed, and what this process left (it is the model_dir's only writer, so
// an earlier manager's failed save).
void CheckpointManager::remove_stale_temporaries() {
  for (const std::string& name : env_->list_dir(model_dir_)) {
    bool ours = name.starts_with(options_.basename + "-") ||
                name.starts_with(std::string(kStateFileName) + ".");
    if (ours && (temporary_of_this_process(name) ||
                 temporary_is_abandoned(*env_, model_dir_, name))) {
      LOG(INFO) << "removing " << name << ", left by an interrupted save";
      env_->remove_file(join_path(model_dir_, name));
    }
  }
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  MutexLock lock(mutex_);
  std::vector<std::string> paths;
  for (const Entry& entry : entries_) paths.push_back(join_path(model_dir_, entry.name));
  return paths;
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  MutexLock lock(mutex_);
  if (entries_.empty()) return std::nullopt;
  return join_path(model_dir_, entries_.back().name);
}

std::vector<std::string> CheckpointManager::pending_deletions() const {
  MutexLock lock(mutex_);
  std::vector<std::string> paths;
  for (const std::string& name : pending_) paths.push_back(join_path(model_dir_, name));
  return paths;
}

}  // namespace cadre::checkpoint
