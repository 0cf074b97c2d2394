#include "cadre/runtime/threading.h"

#include <glog/logging.h>
#include <omp.h>
#include <pmmintrin.h>
#include <sched.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/runtime/compute_elsewhere.h"
#include "core/runtime/parallel_for.h"

namespace cadre {
namespace {

int initial_budget() {
  int threads = hardware_threads();
  if (const char* cap = std::getenv("CADRE_NUM_THREADS"); cap != nullptr && *cap != '\0') {
    // strtoll, so that a value past int (or with digits past it) is large, not wrapped.
    long long value = std::strtoll(cap, nullptr, 10);
    if (value > max_intra_op_threads()) {
      LOG(WARNING) << "CADRE_NUM_THREADS=" << cap << " is more than " << max_intra_op_threads()
                   << ", the most this process may use (" << kMaxThreadsPerCore
                   << " threads a core on its " << hardware_threads() << " cores); using "
                   << max_intra_op_threads();
      value = max_intra_op_threads();
    }
    if (value > 0) threads = static_cast<int>(value);
  }
  return std::max(1, threads);
}

std::atomic<int>& budget() {
  static std::atomic<int> value{initial_budget()};
  return value;
}

std::atomic<int> generation{1};

struct ThreadState {
  int divisor = 1;  // replicas sharing the budget on this thread's behalf
  int applied_generation = 0;
  int threads = 1;
  bool flushes_denormals = false;
  bool compute_elsewhere = false;  // ComputeElsewhereScope
};
thread_local ThreadState state;

// Denormal floats make x86 arithmetic up to 100x slower, and training produces them (tiny
// Adam second moments, vanishing gradients). Like TensorFlow, kernels run with denormals
// flushed to zero (FTZ) and read as zero (DAZ). MXCSR is per thread.
void flush_denormals() {
  if (state.flushes_denormals) return;
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  state.flushes_denormals = true;
}

int refresh() {
  int gen = generation.load(std::memory_order_acquire);
  if (state.applied_generation != gen) {
    flush_denormals();
    state.threads = std::max(1, budget().load(std::memory_order_relaxed) / state.divisor);
    omp_set_num_threads(state.threads);  // what oneDNN's OpenMP runtime reads
    state.applied_generation = gen;
  }
  return state.threads;
}

}  // namespace

int hardware_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int intra_op_threads_budget() { return budget().load(std::memory_order_relaxed); }

int max_intra_op_threads() { return kMaxThreadsPerCore * hardware_threads(); }

void set_intra_op_threads(int threads) {
  if (threads > max_intra_op_threads()) {
    throw InvalidArgumentError(
        str_cat("intra-op threads: ", threads, " (--threads, set_intra_op_threads) is more than ",
                max_intra_op_threads(), ", the most this process may use (", kMaxThreadsPerCore,
                " threads a core on its ", hardware_threads(), " cores)"));
  }
  budget().store(std::max(1, threads), std::memory_order_relaxed);
  generation.fetch_add(1, std::memory_order_release);
}

int current_thread_budget() { return refresh(); }

namespace {
std::atomic<int> sharing_processes{1};
}  // namespace

void set_processes_sharing_cores(int processes) {
  sharing_processes.store(std::max(1, processes), std::memory_order_relaxed);
}

bool spare_core() {
  if (state.compute_elsewhere) return hardware_threads() > 1;
  return static_cast<int64_t>(intra_op_threads_budget()) *
             sharing_processes.load(std::memory_order_relaxed) <
         hardware_threads();
}

ComputeElsewhereScope::ComputeElsewhereScope() : previous_(state.compute_elsewhere) {
  state.compute_elsewhere = true;
}

ComputeElsewhereScope::~ComputeElsewhereScope() { state.compute_elsewhere = previous_; }

ReplicaThreadScope::ReplicaThreadScope(int num_replicas) : previous_divisor_(state.divisor) {
  state.divisor = std::max(1, num_replicas);
  state.applied_generation = 0;
  refresh();
}

ReplicaThreadScope::~ReplicaThreadScope() {
  state.divisor = previous_divisor_;
  state.applied_generation = 0;
  refresh();
}

void parallel_for_impl(int64_t begin, int64_t end, int64_t grain, int threads, RangeFn fn) {
  int64_t chunks = (end - begin + grain - 1) / grain;
  int team = static_cast<int>(std::min<int64_t>(threads, chunks));
#pragma omp parallel num_threads(team)
  {
    flush_denormals();  // workers are OpenMP's threads: set their mode once each
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t b = begin + c * grain;
      fn(b, std::min(end, b + grain));
    }
  }
}

}  // namespace cadre
