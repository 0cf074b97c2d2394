// The CPU backend: host memory for every cpu:N device, and the CPU kernels.
#include <cblas.h>

#include <cstring>

#include "core/backend/backends.h"
#include "core/backend/cpu/kernels.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/device_backend.h"

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

void register_backend() {
  // OpenBLAS's own pool would run beside the intra-op pool and oversubscribe the cores;
  // Cadre calls it from inside its budget instead.
  openblas_set_num_threads(1);
  register_device_backend(DeviceType::kCPU, std::make_unique<CpuBackend>());
  register_elementwise_kernels();
  register_activation_kernels();
  register_reduction_kernels();
  register_matmul_kernels();
  register_softmax_kernels();
  register_conv_kernels();
  register_pool_kernels();
  register_batch_norm_kernels();
  register_index_kernels();
  register_random_kernels();
  register_optimizer_kernels();
}

}  // namespace cadre::backend::cpu
