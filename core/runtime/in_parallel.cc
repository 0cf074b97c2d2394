#include "core/runtime/in_parallel.h"

#include <exception>
#include <future>

namespace cadre {

void in_parallel(const std::vector<int>& which, const std::function<void(int)>& fn) {
  if (which.empty()) return;
  std::vector<std::future<void>> others;
  for (size_t k = 1; k < which.size(); ++k) {
    others.push_back(std::async(std::launch::async, fn, which[k]));
  }
  std::exception_ptr first;
  try {
    fn(which[0]);
  } catch (...) {
    first = std::current_exception();
  }
  for (auto& other : others) {
    try {
      other.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void in_parallel(int n, const std::function<void(int)>& fn) {
  std::vector<int> all(n > 0 ? n : 0);
  for (int i = 0; i < n; ++i) all[i] = i;
  in_parallel(all, fn);
}

}  // namespace cadre
