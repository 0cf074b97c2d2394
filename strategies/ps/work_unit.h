// The unit of steps a coordinator gave this worker (coordinator mode, docs/DEPLOY.md), as
// the worker's pushes carry it to ps 0's ledger (unit_ledger.h), and what ps 0 answered to
// the last of them. The worker's server sets the unit; the training loop's pushes read it
// and record the answers, from which the loop learns that the unit is complete.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "cadre/base/mutex.h"

namespace cadre::ps {

struct WorkUnit {
  int64_t generation = 0;  // the coordinator's (a new coordinator's is higher)
  int64_t id = 0;          // > 0
  int64_t steps = 0;       // the steps the unit stands for
};

// What ps 0 said about the last push of a unit.
struct UnitOutcome {
  int64_t unit = 0;
  int64_t applied = 0;  // the unit's steps applied so far
  bool closed = false;  // this push was refused: the unit is complete or was replaced
  int64_t global_step = 0;
  // With `closed`: a newer coordinator replaced the one that gave the unit, and the worker
  // reads this push's batch again.
  bool replaced = false;
  // Whether the unit needs no more steps.
  bool complete(const WorkUnit& of) const {
    return unit == of.id && (closed || applied >= of.steps);
  }
};

class WorkUnitSlot {
 public:
  void set(std::optional<WorkUnit> unit);
  std::optional<WorkUnit> current() const;
  void record(const UnitOutcome& outcome);
  std::optional<UnitOutcome> last() const;
  // Whether a push recorded since the last call was refused because its coordinator was
  // replaced (UnitOutcome::replaced).
  bool take_replaced();

 private:
  mutable Mutex mutex_;
  std::optional<WorkUnit> current_ CADRE_GUARDED_BY(mutex_);
  std::optional<UnitOutcome> last_ CADRE_GUARDED_BY(mutex_);
  bool replaced_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace cadre::ps
