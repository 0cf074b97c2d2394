#include "cadre/checkpoint/watcher.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/lease.h"

namespace cadre::checkpoint {
namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

double steady_seconds() {
  using std::chrono::duration;
  return duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

CheckpointWatcher::CheckpointWatcher(std::string model_dir, WatcherOptions options)
    : model_dir_(std::move(model_dir)),
      options_(std::move(options)),
      env_(options_.env ? options_.env : posix_env()),
      last_step_(options_.after_step) {
  if (options_.lease_seconds > 0) {
    lease_ = std::make_unique<Lease>(env_, model_dir_, unique_lease_holder("watcher"));
    if (options_.protect_unseen) lease_from(last_step_ + 1, kNoLimit);
  }
  if (options_.use_inotify) start_inotify();
}

CheckpointWatcher::~CheckpointWatcher() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (!lease_) return;
  // Letting go: what retention dropped while this watcher leased it goes now, unless another
  // reader still holds it (the chief may have ended long ago).
  try {
    lease_->release();
    // A predecessor killed before it could let go (a restarted evaluator's) leaves its lease,
    // which nobody else may come to reclaim once training has ended.
    remove_stale_leases(*env_, model_dir_, /*grace_seconds=*/3600);
    delete_unleased_checkpoints(*env_, model_dir_, read_pending_deletions(*env_, model_dir_),
                                options_.basename);
  } catch (const std::exception& error) {
    LOG(WARNING) << "releasing checkpoints in " << model_dir_ << ": " << error.what();
  }
}

void CheckpointWatcher::lease_from(int64_t first_step, int64_t last_step) {
  if (!lease_) return;
  try {
    lease_->hold(first_step, last_step, options_.lease_seconds);
  } catch (const PermissionDeniedError& error) {
    // A read-only model_dir: nobody deletes there either. Said once, not at every poll.
    LOG(WARNING) << "cannot lease checkpoints in " << model_dir_ << " (" << error.what()
                 << "); reading without a lease";
    lease_.reset();
  } catch (const Error& error) {
    // Without the lease retention may remove a checkpoint first; that is handled (skipped
    // with a warning), so a lease that fails must not stop the evaluator.
    LOG(WARNING) << "cannot lease checkpoints in " << model_dir_ << ": " << error.what();
  }
}

void CheckpointWatcher::start_inotify() {
  if (inotify_fd_ < 0) inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) return;  // polling only
  uint32_t events = IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_ONLYDIR;
  watching_ = ::inotify_add_watch(inotify_fd_, model_dir_.c_str(), events) >= 0;
}

void CheckpointWatcher::wait_for_change(double seconds) {
  if (options_.use_inotify && !watching_) start_inotify();  // model_dir may appear later
  if (!watching_) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return;
  }
  pollfd descriptor{inotify_fd_, POLLIN, 0};
  int milliseconds = static_cast<int>(std::ceil(seconds * 1000));
  if (::poll(&descriptor, 1, milliseconds) > 0) {
    char buffer[4096];
    while (::read(inotify_fd_, buffer, sizeof(buffer)) > 0) {
    }
  }
}

std::unique_ptr<CheckpointReader> CheckpointWatcher::next(double timeout_seconds) {
  const double deadline = steady_seconds() + std::max(0.0, timeout_seconds);
  while (true) {
    for (const auto& [step, path] : list_checkpoint_files(*env_, model_dir_, options_.basename)) {
      if (step <= last_step_) continue;
      // Lease before opening, so that retention leaves the file alone from now on.
      lease_from(step, options_.protect_unseen ? kNoLimit : step);
      try {
        std::unique_ptr<CheckpointReader> reader = CheckpointReader::open(path);
        last_step_ = step;
        return reader;
      } catch (const NotFoundError&) {
        LOG(WARNING) << "checkpoint " << path << " was removed (by retention) before it could "
                     << "be opened; skipping it";
      } catch (const Error& error) {
        LOG(ERROR) << "skipping checkpoint " << path << ": " << error.what();
      }
      last_step_ = step;
    }
    if (options_.protect_unseen) lease_from(last_step_ + 1, kNoLimit);
    double remaining = deadline - steady_seconds();
    if (remaining <= 0) return nullptr;
    wait_for_change(std::min(remaining, options_.poll_interval_seconds));
  }
}

}  // namespace cadre::checkpoint
