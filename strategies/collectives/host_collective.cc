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

// Where the job's ranks are: hosts numbered by their first rank; each rank's host and
// place on it.
struct Placement {
  std::vector<int> host_of;  // per rank
  int my_host = 0;
  std::vector<int> mates;  // this host's ranks, in job order
  int local_rank = 0;
  int local_size = 0;
  int num_hosts = 0;
};

// Every rank publishes its host key `own` and reads the others'.
Placement place_ranks(Store& store, int rank, int size, const std::string& own, double timeout) {
  store.set(str_cat("collective/host/", rank), own);
  Placement p;
  std::vector<std::string> hosts;
  p.host_of.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::string key = r == rank ? own : store.get(str_cat("collective/host/", r), timeout);
    auto it = std::find(hosts.begin(), hosts.end(), key);
    p.host_of[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(key);
  }
  p.my_host = p.host_of[rank];
  for (int r = 0; r < size; ++r) {
    if (p.host_of[r] == p.my_host) p.mates.push_back(r);
  }
  p.local_rank =
      static_cast<int>(std::find(p.mates.begin(), p.mates.end(), rank) - p.mates.begin());
  p.local_size = static_cast<int>(p.mates.size());
  p.num_hosts = static_cast<int>(hosts.size());
  return p;
}

// The shared-memory collective of this host's ranks (null for a rank alone on its host, or
// when they cannot share memory), and whether every host's ranks share memory: each host
// says so, so that all choose alike.
std::unique_ptr<ProcessCollective> local_collective(Store& store, const Placement& p,
                                                    const HostCollectiveOptions& options,
                                                    bool& everywhere) {
  std::unique_ptr<ProcessCollective> local;
  if (p.local_size > 1) {
    SharedMemoryOptions shm;
    shm.timeout_seconds = options.timeout_seconds;
    shm.peer_failure = options.peer_failure;
    for (int r : p.mates) shm.rank_names.push_back(rank_name(options.rank_names, r));
    local = shared_memory_collective(store, p.local_rank, p.local_size, shm,
                                     str_cat("collective/shm/", p.my_host));
  }
  if (p.local_rank == 0) {
    store.set(str_cat("collective/shared/", p.my_host), local || p.local_size == 1 ? "yes" : "no");
  }
  everywhere = true;
  for (int h = 0; h < p.num_hosts; ++h) {
    everywhere &= store.get(str_cat("collective/shared/", h), options.timeout_seconds) == "yes";
  }
  return local;
}

// Gloo among the hosts' first ranks (null on the other ranks).
std::unique_ptr<ProcessCollective> leaders_collective(Store& store, int size,
                                                      const std::string& host, const Placement& p,
                                                      const GlooOptions& gloo) {
  if (p.local_rank != 0) return nullptr;
  std::vector<std::string> leader_names;  // each host's first rank (hosts are numbered so)
  for (int r = 0; r < size; ++r) {
    if (p.host_of[r] == static_cast<int>(leader_names.size())) {
      leader_names.push_back(rank_name(gloo.rank_names, r));
    }
  }
  GlooOptions across = gloo;
  across.rank_names = std::move(leader_names);
  return gloo_collective(store, p.my_host, p.num_hosts, host, across, "collective/leaders");
}

}  // namespace

std::unique_ptr<ProcessCollective> host_collective(Store& store, int rank, int size,
                                                   const std::string& host,
                                                   const HostCollectiveOptions& options) {
  GlooOptions gloo;
  gloo.timeout_seconds = options.timeout_seconds;
  gloo.peer_failure = options.peer_failure;
  gloo.rank_names = options.rank_names;
  if (options.transport == HostTransport::kGloo || size == 1) {
    return gloo_collective(store, rank, size, host, gloo);
  }
  const std::string own = options.host_key.empty() ? host_key() : options.host_key;
  Placement p = place_ranks(store, rank, size, own, options.timeout_seconds);
  // This host's workers share its cores: helper threads (an autotuned prefetch) run only
  // where a core is spare.
  set_processes_sharing_cores(p.local_size);
  if (p.num_hosts == size && options.transport == HostTransport::kAuto) {
    // Nobody to share memory with.
    return gloo_collective(store, rank, size, host, gloo);
  }
  bool everywhere = false;
  std::unique_ptr<ProcessCollective> local = local_collective(store, p, options, everywhere);
  if (!everywhere) {
    if (options.transport == HostTransport::kSharedMemory) {
      throw UnavailableError(str_cat("the ", size, " processes cannot share memory within ",
                                     "each of their ", p.num_hosts, " hosts"));
    }
    LOG(WARNING) << "processes of one host cannot share /dev/shm; every process reduces "
                 << "through Gloo's TCP instead";
    return gloo_collective(store, rank, size, host, gloo);
  }
  if (p.num_hosts == 1) return local;
  if (options.transport == HostTransport::kSharedMemory) {
    throw UnavailableError(str_cat("shared-memory collectives need every one of the ", size,
                                   " processes on one host; they are on ", p.num_hosts));
  }
  std::unique_ptr<ProcessCollective> leaders = leaders_collective(store, size, host, p, gloo);
  return hierarchical_collective(rank, size, std::move(local), std::move(leaders),
                                 std::move(p.host_of));
}

}  // namespace cadre
