#include "cadre/tensor/buffer.h"

#include "core/tensor/allocator.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/device_backend.h"

namespace cadre {

Buffer::Buffer(Device device, size_t bytes) : device_(device), bytes_(bytes) {
  allocator_ =
      device.is_cpu() ? &cpu_allocator() : &device_backend(device.type)->allocator(device.index);
  data_ = allocator_->allocate(bytes);
}

Buffer::Buffer(Device device, void* data, size_t bytes, std::function<void()> release)
    : device_(device), data_(data), bytes_(bytes), release_(std::move(release)) {}

Buffer::Buffer(Device device, size_t bytes, std::shared_ptr<const BufferFill> fill)
    : Buffer(device, bytes) {
  fill_ = std::move(fill);
  unfilled_.store(fill_ != nullptr, std::memory_order_release);
}

void Buffer::run_fill() const {
  std::call_once(filled_, [this] {
    fill_->fill(data_);
    unfilled_.store(false, std::memory_order_release);
  });
}

Buffer::~Buffer() {
  if (allocator_ != nullptr) {
    allocator_->deallocate(data_, bytes_);
  } else if (release_) {
    release_();
  }
}

}  // namespace cadre
