#include "strategies/ps/in_parallel.h"

#include <exception>
#include <future>

namespace cadre::ps {

void in_parallel(const std::vector<int>& which, const std::function<void(int)>& fn) {
  if (which.size() == 1) {
    fn(which[0]);
    return;
  }
  std::vector<std::future<void>> done;
  for (int i : which) done.push_back(std::async(std::launch::async, fn, i));
  std::exception_ptr first;
  for (auto& f : done) {
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::vector<int> indices(size_t n) {
  std::vector<int> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = static_cast<int>(i);
  return all;
}

}  // namespace cadre::ps
