// A barrier for processes that share memory: it spins briefly (a peer on another core
// arrives within microseconds when the work is balanced), then sleeps on a futex, so that
// processes that share cores do not steal them from each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace cadre {

// Lives in shared memory, zero-initialised by the segment's creator.
struct alignas(64) SharedBarrierState {
  std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> sleepers;
  // 1 + the rank of a process that gave up on the collective, so that the others stop
  // waiting too; 0 while none has.
  alignas(64) std::atomic<uint32_t> broken;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");

// Blocks until `parties` processes have called it on the same state (a generation), or
// throws what `check` throws: check() runs every few milliseconds while this process
// sleeps, to see the deadline and dead peers. Throws AbortedError naming the rank once any
// party has called break_barrier().
void arrive_and_wait(SharedBarrierState& state, uint32_t parties,
                     const std::function<void()>& check);

// Wakes and fails every waiter, now and later: `rank` gave up.
void break_barrier(SharedBarrierState& state, int rank);

}  // namespace cadre
