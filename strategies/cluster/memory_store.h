// A Store in this process's memory, for ranks that are threads of one process (tests of
// the collectives, as Gloo's HashStore).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cadre/base/mutex.h"
#include "strategies/cluster/store.h"

namespace cadre {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_seconds) override;
  void wait(const std::vector<std::string>& keys, double timeout_seconds) override;

 private:
  Mutex mutex_;
  CondVar changed_;
  std::map<std::string, std::string> values_ CADRE_GUARDED_BY(mutex_);
};

}  // namespace cadre
