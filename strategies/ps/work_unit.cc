#include "strategies/ps/work_unit.h"

namespace cadre::ps {

void WorkUnitSlot::set(std::optional<WorkUnit> unit) {
  MutexLock lock(mutex_);
  current_ = unit;
}

std::optional<WorkUnit> WorkUnitSlot::current() const {
  MutexLock lock(mutex_);
  return current_;
}

void WorkUnitSlot::record(const UnitOutcome& outcome) {
  MutexLock lock(mutex_);
  last_ = outcome;
}

std::optional<UnitOutcome> WorkUnitSlot::last() const {
  MutexLock lock(mutex_);
  return last_;
}

}  // namespace cadre::ps
