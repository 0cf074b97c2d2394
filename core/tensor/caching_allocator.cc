#include "core/tensor/caching_allocator.h"

#include <bit>
#include <cstdlib>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

CachingAllocator::CachingAllocator(SystemAllocator system) : system_(std::move(system)) {}

CachingAllocator::~CachingAllocator() {
  MutexLock lock(mutex_);
  release_cached_locked();
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= 512) return bytes == 0 ? 64 : (bytes + 63) & ~size_t{63};
  size_t power = std::bit_floor(bytes);
  size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = round_size(bytes);
  MutexLock lock(mutex_);
  ++stats_.num_allocations;
  void* ptr = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    ptr = system_.allocate(size);
    if (ptr == nullptr) {  // give the cache back and try once more before failing
      release_cached_locked();
      ptr = system_.allocate(size);
    }
    if (ptr == nullptr) {
      throw ResourceExhaustedError(str_cat("out of memory on ", system_.device_name, " allocating ",
                                           bytes, " bytes with ", stats_.bytes_in_use,
                                           " bytes in use"));
    }
    ++stats_.num_system_allocations;
    stats_.bytes_reserved += static_cast<int64_t>(size);
  }
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t size = round_size(bytes);
  MutexLock lock(mutex_);
  free_blocks_[size].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
}

AllocatorStats CachingAllocator::stats() const {
  MutexLock lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  MutexLock lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingAllocator::release_cached() {
  MutexLock lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* ptr : blocks) system_.deallocate(ptr);
    stats_.bytes_reserved -= static_cast<int64_t>(size * blocks.size());
  }
  free_blocks_.clear();
}

Allocator& cpu_allocator() {
  // Never destroyed: tensors held by static objects may be freed during exit.
  static auto* allocator = new CachingAllocator({
      "cpu",
      [](size_t bytes) { return std::aligned_alloc(64, bytes); },  // sizes are multiples of 64
      [](void* ptr) { std::free(ptr); },
  });
  return *allocator;
}

}  // namespace cadre
