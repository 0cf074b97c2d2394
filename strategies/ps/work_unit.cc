#include "strategies/ps/work_unit.h"

#include <utility>

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
  replaced_ |= outcome.replaced;
}

bool WorkUnitSlot::take_replaced() {
  MutexLock lock(mutex_);
  return std::exchange(replaced_, false);
}

std::optional<UnitOutcome> WorkUnitSlot::last() const {
  MutexLock lock(mutex_);
  return last_;
}

}  // namespace cadre::ps
