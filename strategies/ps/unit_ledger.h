// What ps 0 knows of a coordinator's units of work (coordinator mode, docs/DEPLOY.md): the
// coordinator's generation and, per unit of it, how many of the unit's steps have been
// applied. A step of a unit is applied only while the unit is short of its steps and of the
// current generation, so that each step counts once on the global step however often the
// unit is dispatched again (after its worker died, or to a worker thought dead that was not).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cadre/base/mutex.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

class UnitLedger {
 public:
  // A new coordinator: `generation` must be above the current one (InvalidArgumentError
  // naming both otherwise); the ledger empties, and earlier generations' steps are refused.
  void begin(int64_t generation);
  int64_t generation() const;

  // Takes one step of `unit` (of `steps` steps) for a push about to be applied: returns the
  // unit's steps applied with this one, or 0 when the step must be refused (the unit is
  // complete, or of another generation). InvalidArgumentError for a unit without steps.
  int64_t reserve(int64_t generation, int64_t unit, int64_t steps);
  // Gives back a step reserved for a push that then failed.
  void release(int64_t unit);

  // The steps applied of each unit of the current generation (0 for one never seen).
  std::vector<int64_t> applied(const std::vector<int64_t>& units) const;

  // A Units call (ps.proto) without the global step: begins a generation, or answers for
  // units of the current one (FailedPreconditionError naming `task` when it was replaced).
  UnitsResponse serve(const UnitsRequest& request, const std::string& task);

 private:
  mutable Mutex mutex_;
  int64_t generation_ CADRE_GUARDED_BY(mutex_) = 0;
  std::map<int64_t, int64_t> applied_ CADRE_GUARDED_BY(mutex_);
};

}  // namespace cadre::ps
