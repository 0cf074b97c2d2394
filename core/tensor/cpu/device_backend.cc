#include "core/tensor/cpu/device_backend.h"

#include <cstring>

#include "core/tensor/caching_allocator.h"

namespace cadre::backend::cpu {
namespace {

class CpuBackend : public DeviceBackend {
 public:
  int device_count() const override { return num_cpu_devices(); }
  Allocator& allocator(int) override { return cpu_allocator(); }
  void copy_to_host(int, const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_from_host(int, const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_on_device(int, const void* src, void* dst, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize(int) override {}
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace cadre::backend::cpu
