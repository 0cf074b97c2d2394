#include "strategies/collectives/host_collective.h"

#include <glog/logging.h>

#include <fstream>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/gloo/collective.h"
#include "strategies/collectives/shm/collective.h"

namespace cadre {

namespace {

// Which kernel this process runs under: processes that differ here cannot share memory.
// Equal ones may still not (containers with their own /dev/shm): mapping the segment
// decides.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

std::unique_ptr<ProcessCollective> host_collective(Store& store, int rank, int size,
                                                   const std::string& host,
                                                   const HostCollectiveOptions& options) {
  const double timeout = options.timeout_seconds;
  if (options.transport != HostTransport::kGloo && size > 1) {
    store.set(str_cat("collective/boot/", rank), boot_id());
    bool one_host = true;
    const std::string own = boot_id();
    for (int r = 0; r < size; ++r) one_host &= store.get(str_cat("collective/boot/", r), timeout) == own;
    if (one_host) {
      SharedMemoryOptions shm;
      shm.timeout_seconds = timeout;
      shm.peer_failure = options.peer_failure;
      shm.rank_names = options.rank_names;
      if (auto collective = shared_memory_collective(store, rank, size, shm, "collective/shm")) {
        return collective;
      }
      LOG(WARNING) << "the " << size << " processes run under one kernel but cannot share "
                   << "/dev/shm; they reduce through Gloo's TCP instead";
    }
    if (options.transport == HostTransport::kSharedMemory) {
      throw UnavailableError(str_cat("shared-memory collectives need every one of the ", size,
                                     " processes on one host with one /dev/shm"));
    }
  }
  return gloo_collective(store, rank, size, host, timeout);
}

}  // namespace cadre
