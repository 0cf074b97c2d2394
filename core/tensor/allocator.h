// Memory for tensor buffers. Each device has one Allocator; the CPU one caches freed
// blocks by size class so that a training step reuses memory instead of returning it to
// the system and faulting it back in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cadre/base/errors.h"

namespace cadre {

struct AllocatorStats {
  int64_t bytes_in_use = 0;            // held by live buffers
  int64_t peak_bytes_in_use = 0;       // high-water mark of bytes_in_use since the last reset
  int64_t bytes_reserved = 0;          // in use plus cached, as obtained from the system
  int64_t num_allocations = 0;         // allocate() calls
  int64_t num_system_allocations = 0;  // of those, the ones the cache could not serve
};

// Thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` bytes aligned to 64 bytes (never null; a zero-byte request
  // returns a valid unique pointer). Throws ResourceExhaustedError when memory runs out.
  virtual void* allocate(size_t bytes) = 0;
  // `bytes` must be the size passed to the allocate() that returned `ptr`.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached, unused blocks to the system.
  virtual void release_cached() = 0;
};

}  // namespace cadre
