#include "core/tensor/cuda/device_runtime.h"

#include <glog/logging.h>

#include <memory>

#include "core/tensor/cuda/cuda_error.h"

namespace cadre::backend::cuda {
namespace {

struct Runtimes {
  int count = 0;
  std::vector<std::once_flag> created;
  std::vector<std::unique_ptr<DeviceRuntime>> runtimes;
};

Runtimes& runtimes() {
  // Never destroyed: streams must outlive every tensor, static ones included.
  static Runtimes* table = [] {
    auto* t = new Runtimes;
    t->count = visible_device_count();
    t->created = std::vector<std::once_flag>(static_cast<size_t>(t->count));
    t->runtimes.resize(static_cast<size_t>(t->count));
    return t;
  }();
  return *table;
}

}  // namespace

DeviceRuntime::DeviceRuntime(int device) : device_(device) {
  int previous = 0;
  check(cudaGetDevice(&previous), "cudaGetDevice");
  check(cudaSetDevice(device), "cudaSetDevice");
  // Non-blocking: no implicit synchronisation with the legacy default stream, which
  // nothing in Cadre uses.
  cudaError_t status = cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking);
  if (status == cudaSuccess) status = cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking);
  cudaSetDevice(previous);
  check(status, "cudaStreamCreateWithFlags");
}

cudaEvent_t DeviceRuntime::acquire_event() {
  {
    MutexLock lock(mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return event;
}

void DeviceRuntime::release_event(cudaEvent_t event) {
  MutexLock lock(mutex_);
  free_events_.push_back(event);
}

cudaEvent_t DeviceRuntime::record(cudaStream_t stream) {
  cudaEvent_t event = acquire_event();
  cudaError_t status = cudaEventRecord(event, stream);
  if (status != cudaSuccess) {
    release_event(event);
    check(status, "cudaEventRecord");
  }
  return event;
}

void DeviceRuntime::order_after(cudaStream_t waiter, cudaStream_t signaller) {
  cudaEvent_t event = record(signaller);
  // A wait binds to the event's latest record at the time of the call, so the event may
  // go back to the pool (and be recorded again) at once.
  cudaError_t status = cudaStreamWaitEvent(waiter, event, 0);
  release_event(event);
  check(status, "cudaStreamWaitEvent");
}

int visible_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: a CPU-only machine
    return 0;
  }
  return count;
}

DeviceRuntime& runtime(int device) {
  Runtimes& table = runtimes();
  CHECK(device >= 0 && device < table.count) << "gpu:" << device << " is not a visible device";
  std::call_once(table.created[device],
                 [&] { table.runtimes[device] = std::make_unique<DeviceRuntime>(device); });
  return *table.runtimes[device];
}

}  // namespace cadre::backend::cuda
