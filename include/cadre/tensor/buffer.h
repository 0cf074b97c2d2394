// A reference-counted block of device memory that tensors view. Tensors share a buffer
// through std::shared_ptr; the memory returns to its device's allocator with the last view.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "cadre/tensor/device.h"

namespace cadre {

class Allocator;

class Buffer {
 public:
  // Allocates `bytes` on `device` (from its caching allocator).
  Buffer(Device device, size_t bytes);
  // Wraps memory owned elsewhere; `release` runs when the buffer dies.
  Buffer(Device device, void* data, size_t bytes, std::function<void()> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;  // null for wrapped memory
  std::function<void()> release_;
};

}  // namespace cadre
