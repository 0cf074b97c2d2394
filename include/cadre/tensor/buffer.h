// A reference-counted block of device memory that tensors view. Tensors share a buffer
// through std::shared_ptr; the memory returns to its device's allocator with the last view.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

#include "cadre/tensor/device.h"

namespace cadre {

class Allocator;

// Writes a buffer's contents when they are first needed (see Buffer's third constructor).
class BufferFill {
 public:
  virtual ~BufferFill() = default;
  virtual void fill(void* data) const = 0;
};

class Buffer {
 public:
  // Allocates `bytes` on `device` (from its caching allocator).
  Buffer(Device device, size_t bytes);
  // Wraps memory owned elsewhere; `release` runs when the buffer dies.
  Buffer(Device device, void* data, size_t bytes, std::function<void()> release);
  // Allocates `bytes` and leaves them to `fill`, which runs once, on the thread that first
  // asks for data(): an op's output that the op reading it may compute for itself from the
  // op's inputs (a convolution's output that a max pooling takes), so that it is written
  // only if something else reads it.
  Buffer(Device device, size_t bytes, std::shared_ptr<const BufferFill> fill);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const {
    if (unfilled_.load(std::memory_order_acquire)) [[unlikely]]
      run_fill();
    return data_;
  }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // The fill while it has not run; null after (and for other buffers).
  const BufferFill* pending_fill() const {
    return unfilled_.load(std::memory_order_acquire) ? fill_.get() : nullptr;
  }

 private:
  void run_fill() const;

  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;  // null for wrapped memory
  std::function<void()> release_;
  std::shared_ptr<const BufferFill> fill_;
  mutable std::atomic<bool> unfilled_{false};
  mutable std::once_flag filled_;
};

}  // namespace cadre
