// A Store in this process's memory, for ranks that are threads of one process (tests of
// the collectives, as Gloo's HashStore).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "strategies/cluster/store.h"

namespace cadre {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_seconds) override;
  void wait(const std::vector<std::string>& keys, double timeout_seconds) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;  // GUARDED_BY(mutex_)
};

}  // namespace cadre
