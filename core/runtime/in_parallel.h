// Fan-out for I/O-bound work (ps requests, checkpoint blocks): one thread per call, the
// calling thread taking the first, and the first failure rethrown once every call has ended.
// Compute kernels use parallel_for (cadre/runtime/threading.h) instead.
#pragma once

#include <functional>
#include <vector>

namespace cadre {

// fn(i) for each i of `which`, concurrently when there are several.
void in_parallel(const std::vector<int>& which, const std::function<void(int)>& fn);

// fn(0), ..., fn(n - 1), concurrently when n > 1.
void in_parallel(int n, const std::function<void(int)>& fn);

}  // namespace cadre
