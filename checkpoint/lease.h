// Leases: a reader's (an evaluator's) claim that retention must not delete some
// checkpoints of a model_dir for a while. Works across processes on one file system.
//
// A lease is a small text file model_dir/.leases/<holder>.lease, replaced atomically, that
// names a range of global steps and an expiry in wall-clock seconds:
//
//   holder: "evaluator-host-4242-1a2b"
//   first_step: 1000
//   last_step: 1000
//   expires_at: 1764000123.5
//
// CheckpointManager skips deleting a checkpoint whose step lies in an unexpired lease and
// retries at its next save. A holder that dies stops renewing, so its lease expires and
// blocks nothing for long.
//
// A reader that takes a lease and then finds the file gone lost the race with a deletion
// that had already decided; an open CheckpointReader keeps its file readable regardless.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/env.h"

namespace cadre::checkpoint {

inline constexpr char kLeaseDirName[] = ".leases";

struct LeaseRecord {
  std::string holder;
  int64_t first_step = 0;
  int64_t last_step = 0;
  double expires_at = 0;

  bool covers(int64_t step, double now) const {
    return now < expires_at && first_step <= step && step <= last_step;
  }
};

// Every lease file of `model_dir` that parses (expired ones included); files that do not
// parse are skipped (a lease file is only ever replaced whole, so these are not leases).
std::vector<LeaseRecord> read_leases(Env& env, const std::string& model_dir);
bool is_leased(const std::vector<LeaseRecord>& leases, int64_t step, double now);
// Removes lease files that expired more than `grace_seconds` ago; returns how many.
int remove_expired_leases(Env& env, const std::string& model_dir, double grace_seconds);

// A name for a lease holder unique across hosts and processes: "<host>-<pid>-<random>".
std::string unique_lease_holder(const std::string& prefix = "reader");

// One holder's lease. Not thread-safe: one owner at a time.
class Lease {
 public:
  Lease(std::shared_ptr<Env> env, std::string model_dir,
        std::string holder = unique_lease_holder());
  // Releases the lease (best effort: errors are logged, not thrown).
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // Takes or replaces the lease: steps [first_step, last_step] for `seconds` from now.
  // Throws the Env's error when the lease file cannot be written.
  void hold(int64_t first_step, int64_t last_step, double seconds);
  // Removes the lease file; does nothing when none is held.
  void release();
  bool held() const { return held_; }
  const std::string& holder() const { return holder_; }

 private:
  std::shared_ptr<Env> env_;
  std::string model_dir_;
  std::string holder_;
  bool held_ = false;
};

}  // namespace cadre::checkpoint
