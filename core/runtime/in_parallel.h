// Fan-out over ps tasks (or slices): one call per index, concurrently.
#pragma once

#include <functional>
#include <vector>

namespace cadre::ps {

// fn(i) for each i of `which`, in parallel when there are several; rethrows the first error
// once all have ended.
void in_parallel(const std::vector<int>& which, const std::function<void(int)>& fn);

// 0, 1, ..., n - 1.
std::vector<int> indices(size_t n);

}  // namespace cadre::ps
