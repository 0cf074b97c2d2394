// An Allocator that keeps freed blocks in per-size-class free lists and hands them out
// again, over any system allocator (aligned malloc on the host, cudaMalloc on a GPU).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cadre/base/mutex.h"
#include "core/tensor/allocator.h"

namespace cadre {

class CachingAllocator : public Allocator {
 public:
  struct SystemAllocator {
    std::string device_name;                      // for error messages: "cpu", "gpu:0"
    std::function<void*(size_t bytes)> allocate;  // returns null when out of memory
    std::function<void(void* ptr)> deallocate;
  };

  explicit CachingAllocator(SystemAllocator system);
  ~CachingAllocator() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void release_cached() override;

  // The size class a request of `bytes` is served from: at most 25% (or 63 bytes) larger.
  static size_t round_size(size_t bytes);

 private:
  void release_cached_locked() CADRE_REQUIRES(mutex_);

  SystemAllocator system_;
  mutable Mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_ CADRE_GUARDED_BY(mutex_);
  AllocatorStats stats_ CADRE_GUARDED_BY(mutex_);
};

// The host allocator shared by every cpu:N device.
Allocator& cpu_allocator();

}  // namespace cadre
