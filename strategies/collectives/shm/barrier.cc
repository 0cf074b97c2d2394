#include "strategies/collectives/shm/barrier.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

namespace {

// How long a waiter spins before it sleeps: about the time two balanced processes differ
// by at a collective. Shorter spins cost a futex round trip (~5 us) on every call; longer
// ones burn a core that a process sharing it could use.
constexpr int kSpins = 500;
constexpr long kCheckEveryNanos = 5'000'000;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Not FUTEX_PRIVATE: the word is in memory that other processes map.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, long nanos) {
  timespec timeout{0, nanos};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &timeout, nullptr,
            0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

void throw_if_broken(const SharedBarrierState& state) {
  if (uint32_t broken = state.broken.load(std::memory_order_acquire); broken != 0) {
    throw AbortedError(str_cat("rank ", broken - 1, " gave up on the collective"));
  }
}

}  // namespace

void arrive_and_wait(SharedBarrierState& state, uint32_t parties,
                     const std::function<void()>& check) {
  throw_if_broken(state);
  const uint32_t generation = state.generation.load(std::memory_order_acquire);
  if (state.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == parties) {
    state.arrived.store(0, std::memory_order_relaxed);
    // seq_cst on both sides: either a sleeper's count is seen here, or the sleeper's futex
    // sees the new generation and does not sleep.
    state.generation.fetch_add(1, std::memory_order_seq_cst);
    if (state.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(state.generation);
    return;
  }
  int spins = 0;
  while (state.generation.load(std::memory_order_acquire) == generation) {
    throw_if_broken(state);
    if (++spins < kSpins) {
      cpu_relax();
      continue;
    }
    try {
      check();
    } catch (...) {
      // A peer that went on past this barrier and then died did arrive.
      if (state.generation.load(std::memory_order_acquire) != generation) break;
      throw;
    }
    state.sleepers.fetch_add(1, std::memory_order_seq_cst);
    futex_wait(state.generation, generation, kCheckEveryNanos);
    state.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void break_barrier(SharedBarrierState& state, int rank) {
  // The generation stays: it moves only when every party has arrived, so that a waiter
  // that sees it move knows it passed, however the collective ended after. Sleepers wake
  // now and see `broken` (or within kCheckEveryNanos, if the wake-up came before they slept).
  // The first to give up is the one named.
  uint32_t none = 0;
  state.broken.compare_exchange_strong(none, static_cast<uint32_t>(rank) + 1,
                                       std::memory_order_seq_cst);
  futex_wake_all(state.generation);
}

}  // namespace cadre
