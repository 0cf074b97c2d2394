// The key-value store that the processes of a job rendezvous through (PyTorch c10d's
// Store): Gloo's full mesh exchanges addresses through it, NCCL's unique id travels by it.
// The coordination service is the store of a cluster (CoordinationClient); MemoryStore
// serves ranks that are threads of one process.
#pragma once

#include <string>
#include <vector>

namespace cadre {

// Values are bytes; a key keeps its value until it is set again. Thread-safe; every wait
// takes a timeout.
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to timeout_seconds for it to be set. Throws
  // DeadlineExceededError naming the key after that, or the store's own error (the
  // coordination service's AbortedError for a failed cluster, UnavailableError when it is
  // gone).
  virtual std::string get(const std::string& key, double timeout_seconds) = 0;
  // Returns once every one of `keys` is set; throws as get() does, after timeout_seconds
  // in all.
  virtual void wait(const std::vector<std::string>& keys, double timeout_seconds) = 0;
};

}  // namespace cadre
