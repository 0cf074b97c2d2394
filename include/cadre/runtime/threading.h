// One budget of intra-op threads for the whole process.
//
// Kernels parallelise with OpenMP, and oneDNN with the same OpenMP runtime, so a single
// pool of workers serves both. The budget defaults to the cores this process may run on
// (its affinity mask), capped by the environment variable CADRE_NUM_THREADS or by
// set_intra_op_threads(). Threads that run replicas side by side split it with a
// ReplicaThreadScope, so that N replicas use budget/N threads each and the process never
// runs more busy threads than the budget. OpenBLAS keeps its own pool; Cadre sets it to
// one thread and calls it only from inside this budget.
#pragma once

#include <cstdint>

namespace cadre {

// Cores in this process's affinity mask.
int hardware_threads();
// The process-wide budget.
int intra_op_threads_budget();
// The largest budget: kMaxThreadsPerCore threads a core of hardware_threads(). A few threads
// a core is a legitimate experiment (a laptop standing in for a server); thousands only
// thrash (a step takes minutes), and libgomp crashes creating a hundred thousand.
inline constexpr int kMaxThreadsPerCore = 64;
int max_intra_op_threads();
// Sets the process-wide budget (at least 1; more than hardware_threads() is allowed but
// oversubscribes). Threads pick the change up at their next parallel section. Throws
// InvalidArgumentError, naming both numbers, past max_intra_op_threads(): an explicit
// request for more is a mistake to report, not to round (a program's --threads ends in one
// line). CADRE_NUM_THREADS past it is lowered to it with a warning instead: the library reads
// it lazily, where an error would surface from whichever kernel runs first, and it is a cap
// (cadre_launch divides the cores through it), as OMP_THREAD_LIMIT is.
void set_intra_op_threads(int threads);
// Threads that a parallel section started on the calling thread may use.
int current_thread_budget();

// Processes of this job that run on this host's cores, each with a budget like this one's
// (default 1). MultiWorkerMirroredStrategy sets it to the workers it finds on this host.
void set_processes_sharing_cores(int processes);
// Whether the cores have room for a helper thread beside the compute threads: the budget
// times the processes sharing the cores is under hardware_threads(), or the calling
// thread's computation runs elsewhere (its replicas are on GPUs). An autotuned prefetch
// reads its input on the consumer's thread when they have none.
bool spare_core();

// For the lifetime of the scope, the calling thread (a replica) uses its share of the
// budget: max(1, budget / num_replicas) threads.
class ReplicaThreadScope {
 public:
  explicit ReplicaThreadScope(int num_replicas);
  ~ReplicaThreadScope();
  ReplicaThreadScope(const ReplicaThreadScope&) = delete;
  ReplicaThreadScope& operator=(const ReplicaThreadScope&) = delete;

 private:
  int previous_divisor_;
};

}  // namespace cadre
