#include "checkpoint/lease.h"

#include <glog/logging.h>
#include <unistd.h>

#include <random>
#include <sstream>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/parts.h"
#include "core/base/process_id.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

constexpr char kSuffix[] = ".lease";

std::string lease_dir(const std::string& model_dir) { return join_path(model_dir, kLeaseDirName); }

std::optional<LeaseRecord> parse_lease(const std::string& text) {
  LeaseRecord record;
  int fields = 0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    try {
      if (key == "holder") {
        if (value.size() < 2) return std::nullopt;
        record.holder = value.substr(1, value.size() - 2);
        ++fields;
      } else if (key == "first_step") {
        record.first_step = std::stoll(value);
        ++fields;
      } else if (key == "last_step") {
        record.last_step = std::stoll(value);
        ++fields;
      } else if (key == "expires_at") {
        record.expires_at = std::stod(value);
        ++fields;
      } else if (key == "owner") {
        if (value.size() < 2) return std::nullopt;
        record.owner = value.substr(1, value.size() - 2);
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (fields != 4) return std::nullopt;
  return record;
}

bool is_lease_name(const std::string& name) {
  return name.ends_with(kSuffix) && !is_temporary_name(name);
}

bool owner_is_dead(const std::string& owner) {
  std::optional<ProcessId> id = parse_process_token(owner);
  return id && liveness(*id) == Liveness::kDead;
}

constexpr char kPendingFile[] = "pending_deletions";

}  // namespace

bool LeaseRecord::covers(int64_t step, double now) const {
  return now < expires_at && first_step <= step && step <= last_step && !owner_is_dead(owner);
}

bool LeaseRecord::stale(double now, double grace_seconds) const {
  return expires_at + grace_seconds < now || owner_is_dead(owner);
}

std::vector<LeaseRecord> read_leases(Env& env, const std::string& model_dir) {
  std::vector<LeaseRecord> leases;
  std::vector<std::string> names;
  try {
    names = env.list_dir(lease_dir(model_dir));
  } catch (const NotFoundError&) {
    return leases;
  }
  for (const std::string& name : names) {
    if (!is_lease_name(name)) continue;
    try {
      if (auto record = parse_lease(env.read_file(join_path(lease_dir(model_dir), name)))) {
        leases.push_back(*record);
      }
    } catch (const NotFoundError&) {
      // Released between listing and reading.
    }
  }
  return leases;
}

bool is_leased(const std::vector<LeaseRecord>& leases, int64_t step, double now) {
  for (const LeaseRecord& lease : leases) {
    if (lease.covers(step, now)) return true;
  }
  return false;
}

int remove_stale_leases(Env& env, const std::string& model_dir, double grace_seconds) {
  double now = env.now_seconds();
  int removed = 0;
  for (const LeaseRecord& lease : read_leases(env, model_dir)) {
    if (lease.stale(now, grace_seconds) &&
        env.remove_file(join_path(lease_dir(model_dir), lease.holder + kSuffix))) {
      if (lease.expires_at + grace_seconds >= now) {
        LOG(INFO) << "releasing the lease of " << lease.holder << ", whose process is gone";
      }
      ++removed;
    }
  }
  std::vector<std::string> names;
  try {
    names = env.list_dir(lease_dir(model_dir));
  } catch (const NotFoundError&) {
    return removed;
  }
  for (const std::string& name : names) {
    if (temporary_is_abandoned(env, lease_dir(model_dir), name)) {
      env.remove_file(join_path(lease_dir(model_dir), name));
    }
  }
  return removed;
}

std::vector<std::string> read_pending_deletions(Env& env, const std::string& model_dir) {
  std::vector<std::string> names;
  std::string text;
  try {
    text = env.read_file(join_path(lease_dir(model_dir), kPendingFile));
  } catch (const NotFoundError&) {
    return names;
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    // Names only, never paths: a damaged list must not reach outside model_dir.
    if (!line.empty() && line.find('/') == std::string::npos && line != "." && line != "..") {
      names.push_back(line);
    }
  }
  return names;
}

void write_pending_deletions(Env& env, const std::string& model_dir,
                             const std::vector<std::string>& names) {
  std::string path = join_path(lease_dir(model_dir), kPendingFile);
  if (names.empty()) {
    env.remove_file(path);
    return;
  }
  env.create_dir(lease_dir(model_dir));
  std::string text;
  for (const std::string& name : names) text += name + "\n";
  write_file_atomically(env, path, text);
}

std::vector<std::string> delete_unleased_checkpoints(Env& env, const std::string& model_dir,
                                                     const std::vector<std::string>& names,
                                                     const std::string& basename) {
  std::vector<std::string> pending;
  if (names.empty()) return pending;
  std::vector<LeaseRecord> leases = read_leases(env, model_dir);
  double now = env.now_seconds();
  for (const std::string& name : names) {
    std::optional<int64_t> step = checkpoint_step(name, basename);
    if (!step) continue;  // not a checkpoint of this model_dir: never ours to delete
    if (is_leased(leases, *step, now)) {
      pending.push_back(name);
      continue;
    }
    try {
      env.remove_file(join_path(model_dir, name));
      remove_parts(env, model_dir, basename, *step);
    } catch (const std::exception& error) {
      LOG(WARNING) << "retention could not delete checkpoint " << name
                   << " (will retry): " << error.what();
      pending.push_back(name);
    }
  }
  return pending;
}

std::string unique_lease_holder(const std::string& prefix) {
  char host[256] = "host";
  ::gethostname(host, sizeof(host) - 1);
  std::random_device random;
  std::ostringstream name;
  name << prefix << "-" << host << "-" << ::getpid() << "-" << std::hex << random();
  return name.str();
}

Lease::Lease(std::shared_ptr<Env> env, std::string model_dir, std::string holder)
    : env_(env ? std::move(env) : posix_env()),
      model_dir_(std::move(model_dir)),
      holder_(std::move(holder)) {
  for (char c : holder_) {
    if (c == '/' || c == '"' || c == '\\' || c < 0x20) {
      throw InvalidArgumentError(str_cat(
          "lease holder '", holder_, "' may not contain '/', '\"', '\\' or control characters"));
    }
  }
}

Lease::~Lease() {
  try {
    release();
  } catch (const std::exception& error) {
    LOG(WARNING) << "could not release checkpoint lease of " << holder_ << ": " << error.what();
  }
}

void Lease::hold(int64_t first_step, int64_t last_step, double seconds) {
  std::string dir = lease_dir(model_dir_);
  env_->create_dir(dir);
  std::ostringstream text;
  text.precision(17);
  text << "holder: \"" << holder_ << "\"\nfirst_step: " << first_step
       << "\nlast_step: " << last_step << "\nexpires_at: " << env_->now_seconds() + seconds
       << "\nowner: \"" << to_token(this_process()) << "\"\n";
  // Not synced: a crash of the machine ends its owner, and with it the lease.
  write_file_atomically(*env_, join_path(dir, holder_ + kSuffix), text.str(), /*durable=*/false);
  held_ = true;
}

void Lease::release() {
  if (!held_) return;
  held_ = false;
  env_->remove_file(join_path(lease_dir(model_dir_), holder_ + kSuffix));
}

}  // namespace cadre::checkpoint
