// The GPU device backend: gpu:N devices with a caching allocator over cudaMalloc, a
// caching allocator of pinned host memory, and copies on the devices' streams
// (device_runtime.h). With no GPU or no driver it reports zero devices, says why, and
// nothing fails. The CUDA kernels are the kernels layer's (core/backend/cuda).
#include "core/tensor/cuda/device_backend.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/tensor/caching_allocator.h"
#include "core/tensor/cuda/cuda_error.h"
#include "core/tensor/cuda/device_runtime.h"

namespace cadre::backend::cuda {
namespace {

// The completion of a copy on a copy stream: an event recorded after it.
class CudaCopyEvent : public CopyEvent {
 public:
  CudaCopyEvent(DeviceRuntime& rt, cudaEvent_t event, const char* what)
      : rt_(rt), event_(event), what_(what) {}
  ~CudaCopyEvent() override { rt_.release_event(event_); }

  bool ready() override {
    cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(status, what_);
    return true;
  }
  void wait() override { check(cudaEventSynchronize(event_), what_); }

 private:
  DeviceRuntime& rt_;
  cudaEvent_t event_;
  const char* what_;
};

class CudaBackend : public DeviceBackend {
 public:
  CudaBackend() {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      unavailable_ = str_cat("cudaGetDeviceCount: ", cudaGetErrorString(status));
      cudaGetLastError();
      count = 0;
    } else if (count == 0) {
      unavailable_ = "the CUDA driver reports no device";
    }
    count_ = count;
    for (int i = 0; i < count_; ++i) {
      allocators_.push_back(std::make_unique<CachingAllocator>(CachingAllocator::SystemAllocator{
          str_cat("gpu:", i),
          [i](size_t bytes) -> void* {
            int previous = 0;
            cudaGetDevice(&previous);
            cudaSetDevice(i);
            void* ptr = nullptr;
            cudaError_t status = cudaMalloc(&ptr, bytes);
            cudaSetDevice(previous);
            if (status != cudaSuccess) {
              cudaGetLastError();
              return nullptr;  // the caching allocator frees its cache and retries
            }
            return ptr;
          },
          [i](void* ptr) {
            int previous = 0;
            cudaGetDevice(&previous);
            cudaSetDevice(i);
            cudaFree(ptr);  // waits for the device: only when the cache is released
            cudaSetDevice(previous);
          }}));
    }
    pinned_ = std::make_unique<CachingAllocator>(CachingAllocator::SystemAllocator{
        "pinned host memory",
        [](size_t bytes) -> void* {
          void* ptr = nullptr;
          if (cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            return nullptr;
          }
          return ptr;
        },
        [](void* ptr) { cudaFreeHost(ptr); }});
  }

  int device_count() const override { return count_; }
  std::string unavailable_reason() const override { return unavailable_; }
  Allocator& allocator(int index) override { return *allocators_.at(index); }
  Allocator& pinned_host_allocator() override {
    // Without a device, cudaHostAlloc would fail: ordinary host memory serves.
    return count_ > 0 ? *pinned_ : cpu_allocator();
  }

  // Ordered after the device's queued work; the host waits for the copy.
  void copy_to_host(int index, const void* src, void* dst, size_t bytes) override {
    copy_and_wait(index, src, dst, bytes, cudaMemcpyDeviceToHost,
                  "cudaMemcpyAsync (device to host)", "cudaStreamSynchronize (device to host)");
  }
  // The host memory may be pageable and may change after the call: wait for the copy.
  void copy_from_host(int index, const void* src, void* dst, size_t bytes) override {
    copy_and_wait(index, src, dst, bytes, cudaMemcpyHostToDevice,
                  "cudaMemcpyAsync (host to device)", "cudaStreamSynchronize (host to device)");
  }
  void copy_on_device(int index, const void* src, void* dst, size_t bytes) override {
    Current current(index);
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, runtime(index).compute()),
          "cudaMemcpyAsync (device to device)");
  }
  void synchronize(int index) override {
    Current current(index);
    DeviceRuntime& rt = runtime(index);
    check(cudaStreamSynchronize(rt.compute()), "cudaStreamSynchronize (compute stream)");
    check(cudaStreamSynchronize(rt.copy()), "cudaStreamSynchronize (copy stream)");
  }

  // The copy stream waits for the compute stream's queued work (which may still use the
  // destination's memory, or still be writing the source), copies, and the compute stream
  // then waits for the copy before anything queued later.
  std::unique_ptr<CopyEvent> copy_from_host_async(int index, const void* src, void* dst,
                                                  size_t bytes) override {
    return copy_async(index, src, dst, bytes, cudaMemcpyHostToDevice,
                      "cudaMemcpyAsync (host to device, copy stream)");
  }
  std::unique_ptr<CopyEvent> copy_to_host_async(int index, const void* src, void* dst,
                                                size_t bytes) override {
    return copy_async(index, src, dst, bytes, cudaMemcpyDeviceToHost,
                      "cudaMemcpyAsync (device to host, copy stream)");
  }

 private:
  // A copy on the device's compute stream, and the host waits for it.
  void copy_and_wait(int index, const void* src, void* dst, size_t bytes, cudaMemcpyKind kind,
                     const char* copy_call, const char* sync_call) {
    Current current(index);
    cudaStream_t stream = runtime(index).compute();
    check(cudaMemcpyAsync(dst, src, bytes, kind, stream), copy_call);
    check(cudaStreamSynchronize(stream), sync_call);
  }

  // Makes device `index` current for the scope.
  class Current {
   public:
    explicit Current(int index) {
      check(cudaGetDevice(&previous_), "cudaGetDevice");
      if (previous_ != index) check(cudaSetDevice(index), "cudaSetDevice");
    }
    ~Current() { cudaSetDevice(previous_); }

   private:
    int previous_ = 0;
  };

  std::unique_ptr<CopyEvent> copy_async(int index, const void* src, void* dst, size_t bytes,
                                        cudaMemcpyKind kind, const char* what) {
    Current current(index);
    DeviceRuntime& rt = runtime(index);
    rt.order_after(rt.copy(), rt.compute());
    check(cudaMemcpyAsync(dst, src, bytes, kind, rt.copy()), what);
    cudaEvent_t done = rt.record(rt.copy());
    cudaError_t status = cudaStreamWaitEvent(rt.compute(), done, 0);
    auto event = std::make_unique<CudaCopyEvent>(rt, done, what);
    check(status, "cudaStreamWaitEvent (after a copy)");
    return event;
  }

  int count_ = 0;
  std::string unavailable_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
  std::unique_ptr<CachingAllocator> pinned_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace cadre::backend::cuda
