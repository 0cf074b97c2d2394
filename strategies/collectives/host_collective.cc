#include "strategies/collectives/host_collective.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "strategies/collectives/gloo/collective.h"
#include "strategies/collectives/hierarchical_collective.h"
#include "strategies/collectives/shm/collective.h"

namespace cadre {

namespace {

// Which host this process is on, as far as memory goes: the kernel it runs under and its
// network namespace (processes in separate namespaces stand for separate hosts: containers,
// or the benchmark's simulated hosts). Equal ones may still not share memory (containers
// with their own /dev/shm): mapping the segment decides.
std::string host_key() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  struct stat st;
  if (::stat("/proc/self/ns/net", &st) == 0) id += str_cat("/", st.st_ino);
  return id;
}

}  // namespace

std::unique_ptr<ProcessCollective> host_collective(Store& store, int rank, int size,
                                                   const std::string& host,
                                                   const HostCollectiveOptions& options) {
  const double timeout = options.timeout_seconds;
  GlooOptions gloo;
  gloo.timeout_seconds = timeout;
  gloo.peer_failure = options.peer_failure;
  gloo.rank_names = options.rank_names;
  auto name_of = [&](int r) { return rank_name(options.rank_names, r); };
  if (options.transport == HostTransport::kGloo || size == 1) {
    return gloo_collective(store, rank, size, host, gloo);
  }
  const std::string own = options.host_key.empty() ? host_key() : options.host_key;
  store.set(str_cat("collective/host/", rank), own);
  // Hosts numbered by their first rank; each rank's host and place on it.
  std::vector<std::string> hosts;
  std::vector<int> host_of(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::string key = r == rank ? own : store.get(str_cat("collective/host/", r), timeout);
    auto it = std::find(hosts.begin(), hosts.end(), key);
    host_of[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(key);
  }
  const int my_host = host_of[rank];
  std::vector<int> mates;  // this host's ranks, in job order
  for (int r = 0; r < size; ++r) {
    if (host_of[r] == my_host) mates.push_back(r);
  }
  const int local_rank =
      static_cast<int>(std::find(mates.begin(), mates.end(), rank) - mates.begin());
  const int local_size = static_cast<int>(mates.size());
  const int num_hosts = static_cast<int>(hosts.size());
  // This host's workers share its cores: helper threads (an autotuned prefetch) run only
  // where a core is spare.
  set_processes_sharing_cores(local_size);
  if (num_hosts == size && options.transport == HostTransport::kAuto) {
    // Nobody to share memory with.
    return gloo_collective(store, rank, size, host, gloo);
  }

  std::unique_ptr<ProcessCollective> local;
  if (local_size > 1) {
    SharedMemoryOptions shm;
    shm.timeout_seconds = timeout;
    shm.peer_failure = options.peer_failure;
    for (int r : mates) shm.rank_names.push_back(name_of(r));
    local = shared_memory_collective(store, local_rank, local_size, shm,
                                     str_cat("collective/shm/", my_host));
  }
  // Every host says whether its processes share memory, so that all choose alike.
  if (local_rank == 0) {
    store.set(str_cat("collective/shared/", my_host), local || local_size == 1 ? "yes" : "no");
  }
  bool everywhere = true;
  for (int h = 0; h < num_hosts; ++h) {
    everywhere &= store.get(str_cat("collective/shared/", h), timeout) == "yes";
  }
  if (!everywhere) {
    if (options.transport == HostTransport::kSharedMemory) {
      throw UnavailableError(str_cat("the ", size, " processes cannot share memory within ",
                                     "each of their ", num_hosts, " hosts"));
    }
    LOG(WARNING) << "processes of one host cannot share /dev/shm; every process reduces "
                 << "through Gloo's TCP instead";
    return gloo_collective(store, rank, size, host, gloo);
  }
  if (num_hosts == 1) return local;
  if (options.transport == HostTransport::kSharedMemory) {
    throw UnavailableError(str_cat("shared-memory collectives need every one of the ", size,
                                   " processes on one host; they are on ", num_hosts));
  }
  std::unique_ptr<ProcessCollective> leaders;
  if (local_rank == 0) {
    std::vector<std::string> leader_names;  // each host's first rank (hosts are numbered so)
    for (int r = 0; r < size; ++r) {
      if (host_of[r] == static_cast<int>(leader_names.size())) leader_names.push_back(name_of(r));
    }
    GlooOptions across = gloo;
    across.rank_names = std::move(leader_names);
    leaders = gloo_collective(store, my_host, num_hosts, host, across, "collective/leaders");
  }
  return hierarchical_collective(rank, size, std::move(local), std::move(leaders),
                                 std::move(host_of));
}

}  // namespace cadre
