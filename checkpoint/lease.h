// Leases: a reader's (an evaluator's) claim that retention must not delete some
// checkpoints of a model_dir for a while. Works across processes on one file system.
//
// A lease is a small text file model_dir/.leases/<holder>.lease, replaced atomically, that
// names a range of global steps, an expiry in wall-clock seconds and the process holding it
// (pid, start time, host):
//
//   holder: "evaluator-host-4242-1a2b"
//   first_step: 1000
//   last_step: 1000
//   expires_at: 1764000123.5
//   owner: "4242-81234-host"
//
// CheckpointManager skips deleting a checkpoint whose step lies in a live lease and retries
// at its next save, at close, and in a new manager of the model_dir (the names it could not
// delete are kept in model_dir/.leases/pending_deletions). A lease stops protecting when it
// expires or as soon as its owner is seen dead (on its own host), and a reader that releases
// its lease deletes what retention dropped and no one leases any more: nothing stays pinned
// by a reader that died or ended.
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
  std::string owner;  // process token (core/base/process_id.h); empty: unknown

  // Unexpired, covering `step`, and not held by a process known to be dead.
  bool covers(int64_t step, double now) const;
  // Expired for longer than `grace_seconds`, or its owner is dead.
  bool stale(double now, double grace_seconds) const;
};

// Every lease file of `model_dir` that parses (expired ones included); files that do not
// parse are skipped (a lease file is only ever replaced whole, so these are not leases).
std::vector<LeaseRecord> read_leases(Env& env, const std::string& model_dir);
bool is_leased(const std::vector<LeaseRecord>& leases, int64_t step, double now);
// Removes stale lease files (LeaseRecord::stale) and the temporaries of lease writers that
// died; returns how many leases it removed.
int remove_stale_leases(Env& env, const std::string& model_dir, double grace_seconds);

// The checkpoint files (names in model_dir) retention dropped but could not delete yet.
std::vector<std::string> read_pending_deletions(Env& env, const std::string& model_dir);
void write_pending_deletions(Env& env, const std::string& model_dir,
                             const std::vector<std::string>& names);
// Deletes the pending checkpoints that no live lease covers (what a reader does as it lets
// go); returns the names still pending. Leaves the list itself to the manager.
std::vector<std::string> delete_unleased_checkpoints(Env& env, const std::string& model_dir,
                                                     const std::vector<std::string>& names,
                                                     const std::string& basename);

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
