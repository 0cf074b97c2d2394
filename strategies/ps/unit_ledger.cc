#include "strategies/ps/unit_ledger.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {

void UnitLedger::begin(int64_t generation) {
  MutexLock lock(mutex_);
  if (generation <= generation_) {
    throw InvalidArgumentError(str_cat("coordinator generation ", generation,
                                       " is not above the current one, ", generation_,
                                       " (is another coordinator running?)"));
  }
  generation_ = generation;
  applied_.clear();
}

int64_t UnitLedger::generation() const {
  MutexLock lock(mutex_);
  return generation_;
}

int64_t UnitLedger::reserve(int64_t generation, int64_t unit, int64_t steps) {
  if (steps <= 0) {
    throw InvalidArgumentError(str_cat("unit ", unit, " has ", steps, " steps; expected some"));
  }
  MutexLock lock(mutex_);
  if (generation != generation_) return 0;
  int64_t& applied = applied_[unit];
  if (applied >= steps) return 0;
  return ++applied;
}

void UnitLedger::release(int64_t unit) {
  MutexLock lock(mutex_);
  auto it = applied_.find(unit);
  if (it != applied_.end() && it->second > 0) --it->second;
}

std::vector<int64_t> UnitLedger::applied(const std::vector<int64_t>& units) const {
  MutexLock lock(mutex_);
  std::vector<int64_t> out;
  for (int64_t unit : units) {
    auto it = applied_.find(unit);
    out.push_back(it == applied_.end() ? 0 : it->second);
  }
  return out;
}

UnitsResponse UnitLedger::serve(const UnitsRequest& request, const std::string& task) {
  if (request.begin()) {
    begin(request.generation());
  } else if (!request.units().empty() && request.generation() != generation()) {
    throw FailedPreconditionError(str_cat(task, ": coordinator generation ", request.generation(),
                                          " was replaced by ", generation()));
  }
  UnitsResponse response;
  response.set_generation(generation());
  for (int64_t a : applied(std::vector<int64_t>(request.units().begin(), request.units().end()))) {
    response.add_applied(a);
  }
  return response;
}

}  // namespace cadre::ps
