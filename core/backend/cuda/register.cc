// The CUDA backend: gpu:N devices with a caching allocator over cudaMalloc, copies to and
// from the host, and the kernels written so far (fill, copy, matmul). With no GPU or no
// driver the backend reports zero devices and nothing fails.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/backend/backends.h"
#include "core/backend/cuda/cuda_error.h"
#include "core/backend/cuda/kernels.h"
#include "core/base/strings.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/device_backend.h"

namespace cadre::backend::cuda {
namespace {

int query_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: a CPU-only machine
    return 0;
  }
  return count;
}

class CudaBackend : public DeviceBackend {
 public:
  CudaBackend() : count_(query_device_count()) {
    for (int i = 0; i < count_; ++i) {
      allocators_.push_back(std::make_unique<CachingAllocator>(CachingAllocator::SystemAllocator{
          str_cat("gpu:", i),
          [i](size_t bytes) -> void* {
            void* ptr = nullptr;
            check(cudaSetDevice(i), "cudaSetDevice");
            if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
              cudaGetLastError();
              return nullptr;  // the caching allocator frees its cache and retries
            }
            return ptr;
          },
          [i](void* ptr) {
            cudaSetDevice(i);
            cudaFree(ptr);
          }}));
    }
  }

  int device_count() const override { return count_; }
  Allocator& allocator(int index) override { return *allocators_.at(index); }
  void copy_to_host(int index, const void* src, void* dst, size_t bytes) override {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
  }
  void copy_from_host(int index, const void* src, void* dst, size_t bytes) override {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
  }
  void copy_on_device(int index, const void* src, void* dst, size_t bytes) override {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy (device to device)");
  }
  void synchronize(int index) override {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  int count_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
};

}  // namespace

void register_backend() {
  register_device_backend(DeviceType::kGPU, std::make_unique<CudaBackend>());
  register_elementwise_kernels();
  register_matmul_kernels();
}

}  // namespace cadre::backend::cuda
