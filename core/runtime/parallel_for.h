// How kernels spend the intra-op thread budget (cadre/runtime/threading.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cadre/runtime/threading.h"

namespace cadre {

// A non-owning reference to a callable, cheaper than std::function for a hot call.
class RangeFn {
 public:
  template <typename F>
  RangeFn(F& fn)  // NOLINT: implicit by design
      : object_(&fn), call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

// parallel_for's chunks on a team of `threads` OpenMP threads.
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain, int threads, RangeFn fn);

// Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end), each at
// least `grain` long (but the last), on up to current_thread_budget() threads. Chunk
// boundaries depend only on the range and the grain, never on the thread count, so that
// kernels that combine per-chunk partial results give the same bits with any budget.
// fn must not throw.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  if (end <= begin) return;
  if (end - begin <= grain) {
    fn(begin, end);
    return;
  }
  int threads = current_thread_budget();
  if (threads <= 1) {
    for (int64_t b = begin; b < end; b += grain) fn(b, std::min(end, b + grain));
    return;
  }
  parallel_for_impl(begin, end, grain, threads, fn);
}

}  // namespace cadre
