#include "strategies/cluster/memory_store.h"

#include <chrono>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    MutexLock lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, double timeout_seconds) {
  wait({key}, timeout_seconds);
  MutexLock lock(mutex_);
  return values_.at(key);
}

void MemoryStore::wait(const std::vector<std::string>& keys, double timeout_seconds) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(timeout_seconds));
  MutexLock lock(mutex_);
  for (const std::string& key : keys) {
    if (!changed_.wait_until(mutex_, deadline,
                             [&]() CADRE_REQUIRES(mutex_) { return values_.count(key) > 0; })) {
      throw DeadlineExceededError(
          str_cat("key '", key, "' was not set within ", timeout_seconds, " s"));
    }
  }
}

}  // namespace cadre
