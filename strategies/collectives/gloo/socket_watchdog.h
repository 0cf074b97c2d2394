// Ends a Gloo operation that waits on a peer the coordination service has declared dead.
// A hung or unreachable host (a stopped process, a lost link, a machine without power)
// closes no connection, and Gloo's blocking reads would wait for the collective's timeout
// (minutes). The watchdog polls the service's verdict and, once there is one, shuts down the
// sockets of the context's pairs: a blocked read returns at once and the operation fails.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cadre/base/mutex.h"

namespace cadre {

// The listening endpoints (address and port, as bytes) in what a Gloo process publishes for
// its pairs at rendezvous: records of {sockaddr_storage, int64 sequence number}.
std::vector<std::string> listener_endpoints(const std::string& rendezvous_bytes);

class SocketWatchdog {
 public:
  // Finds the sockets of a Gloo context's pairs among this process's file descriptors: the
  // connected TCP sockets one of whose ends is one of `listeners`, the endpoints at which
  // the context's processes accepted their pairs' connections (listener_endpoints()). Then
  // polls `failure` (the service's verdict, empty while every task is alive) every 100 ms
  // on a thread of its own. Without sockets to watch or `failure`, it starts no thread.
  SocketWatchdog(const std::set<std::string>& listeners, std::function<std::string()> failure);
  ~SocketWatchdog();
  SocketWatchdog(const SocketWatchdog&) = delete;
  SocketWatchdog& operator=(const SocketWatchdog&) = delete;

  // The service's verdict: the one that shut the sockets down, else asked now (a peer that
  // learnt it first may have closed its end before this watchdog's next look); empty while
  // every task is alive.
  std::string verdict() const;

  // Shuts the sockets down now, with `why` as the verdict (this process leaves its group:
  // the peers' operations fail at once). Does nothing once there is a verdict.
  void shut_down(const std::string& why);

 private:
  struct Socket {
    int fd;
    std::string inode;  // to tell a descriptor reused for something else
  };
  void watch();
  void shut_down_locked(const std::string& why) CADRE_REQUIRES(mutex_);

  std::function<std::string()> failure_;
  std::vector<Socket> sockets_;
  mutable Mutex mutex_;
  CondVar stop_requested_;
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::string verdict_ CADRE_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace cadre
