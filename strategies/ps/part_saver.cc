#include "strategies/ps/part_saver.h"

#include <glog/logging.h>

#include <chrono>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {
namespace {

// How many finished parts' outcomes a task remembers: a chief asks right after its save.
constexpr size_t kOutcomesKept = 16;

}  // namespace

PartSaver::PartSaver(std::string task, PartWriter write)
    : task_(std::move(task)), write_(std::move(write)) {}

PartSaver::~PartSaver() {
  std::lock_guard<std::mutex> hold(save_mutex_);
  if (writer_.joinable()) writer_.join();
}

SaveResponse PartSaver::save(Shard& shard, const SaveRequest& request) {
  if (!write_) {
    throw FailedPreconditionError(str_cat(task_, " writes no checkpoint parts"));
  }
  const std::string& name = request.file_name();
  if (request.directory().empty() || name.empty() || name.find('/') != std::string::npos ||
      name == "." || name == "..") {
    throw InvalidArgumentError(str_cat(task_, ": cannot write a checkpoint part named '", name,
                                       "' in '", request.directory(), "'"));
  }
  std::lock_guard<std::mutex> hold(save_mutex_);
  auto started = std::chrono::steady_clock::now();
  if (writer_.joinable()) writer_.join();
  auto written = std::chrono::steady_clock::now();
  try {
    shard.snapshot(snapshot_);
  } catch (...) {
    shard.end_snapshot();
    throw;
  }
  auto marked = std::chrono::steady_clock::now();
  int64_t bytes = 0, copied = 0;
  for (const SnapshotItem& item : snapshot_.items) {
    int64_t item_bytes = item.shape.num_elements() * static_cast<int64_t>(dtype_size(item.dtype));
    bytes += item_bytes;
    if (!item.read) copied += item_bytes;
  }
  // What the chief's training waits for: the part before (saves closer than a part takes to
  // write) and the mark.
  LOG(INFO) << task_ << ": checkpoint part " << name << ": marked " << bytes << " bytes (" << copied
            << " copied, the rest copy-on-write) in "
            << std::chrono::duration<double>(marked - written).count() << " s, after "
            << std::chrono::duration<double>(written - started).count()
            << " s waiting for the part before";
  SaveResponse response;
  for (const SnapshotItem& item : snapshot_.items) {
    SavedSlice* slice = response.add_slices();
    slice->set_name(item.name);
    slice->set_slot_of(item.slot_of);
    slice->set_dtype(static_cast<int32_t>(item.dtype));
    slice->set_first_row(item.first_row);
    slice->set_rows(item.shape.rank() == 0 ? 1 : item.shape[0]);
  }
  for (const auto& [counter, value] : snapshot_.iterations) {
    (*response.mutable_iterations())[counter] = value;
  }
  {
    MutexLock lock(mutex_);
    outcomes_[name] = Outcome();
  }
  writer_ = std::thread([this, &shard, request] {
    write(request);
    // After the write, whatever its outcome: updates stop keeping rows aside.
    shard.end_snapshot();
  });
  return response;
}

void PartSaver::write(const SaveRequest& request) {
  Outcome outcome;
  outcome.finished = true;
  auto started = std::chrono::steady_clock::now();
  try {
    auto [bytes, crc] =
        write_(request.directory(), request.file_name(), request.global_step(), snapshot_);
    outcome.written.set_bytes(bytes);
    outcome.written.set_crc32c(crc);
    LOG(INFO) << task_ << ": wrote checkpoint part " << request.file_name() << " (" << bytes
              << " bytes) in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
              << " s";
  } catch (const Error& error) {
    outcome.code = static_cast<int>(error.code());
    outcome.error = error.what();
  } catch (const std::exception& error) {
    outcome.code = static_cast<int>(ErrorCode::kInternal);
    outcome.error = error.what();
  }
  if (outcome.code != 0) {
    LOG(ERROR) << task_ << ": checkpoint part " << request.file_name() << ": " << outcome.error;
  }
  MutexLock lock(mutex_);
  outcomes_[request.file_name()] = outcome;
  for (auto it = outcomes_.begin(); outcomes_.size() > kOutcomesKept && it != outcomes_.end();) {
    bool current = it->first == request.file_name();
    it = it->second.finished && !current ? outcomes_.erase(it) : std::next(it);
  }
  finished_.notify_all();
}

SaveStatusResponse PartSaver::status(const SaveStatusRequest& request) {
  const std::string& name = request.file_name();
  double timeout = request.timeout_seconds() > 0 ? request.timeout_seconds() : 300;
  MutexLock lock(mutex_);
  auto known = [&]() CADRE_REQUIRES(mutex_) { return outcomes_.find(name) != outcomes_.end(); };
  if (!known()) {
    throw NotFoundError(str_cat(task_, " is writing no checkpoint part '", name,
                                "' (was the task restarted since the save began?)"));
  }
  if (!finished_.wait_for(
          mutex_, std::chrono::duration<double>(timeout),
          [&]() CADRE_REQUIRES(mutex_) { return !known() || outcomes_.at(name).finished; })) {
    throw DeadlineExceededError(
        str_cat(task_, ": checkpoint part '", name, "' not written within ", timeout, " s"));
  }
  if (!known()) throw NotFoundError(str_cat(task_, " forgot checkpoint part '", name, "'"));
  const Outcome& outcome = outcomes_.at(name);
  if (outcome.code != 0) throw_error(static_cast<ErrorCode>(outcome.code), outcome.error);
  return outcome.written;
}

}  // namespace cadre::ps
