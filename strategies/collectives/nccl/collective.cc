// NCCL communicators across processes (built with CUDA only; unavailable.cc otherwise).
#include "strategies/collectives/nccl/collective.h"

#include <cuda_runtime.h>
#include <glog/logging.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/tensor/cuda/device_runtime.h"
#include "strategies/collectives/nccl/status.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;
using nccl::check_cuda;
using nccl::check_gpu;
using nccl::check_nccl;
using nccl::CurrentDevice;
using nccl::nccl_type;

class NcclCollective : public GpuCollective {
 public:
  NcclCollective(const std::string& unique_id, int rank, int size, Device device,
                 NcclOptions options)
      : rank_(rank), size_(size), device_(device), options_(std::move(options)) {
    ncclUniqueId id;
    std::memcpy(id.internal, unique_id.data(), sizeof id.internal);
    CurrentDevice current(device_.index);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait is ours, with a deadline
    check_nccl(ncclCommInitRankConfig(&comm_, size, id, rank, &config), "ncclCommInitRankConfig");
    try {
      wait_for_comm("joining the communicator (ncclCommInitRankConfig)");
    } catch (...) {
      abort("joining failed");
      throw;
    }
  }

  ~NcclCollective() override {
    if (comm_ == nullptr) return;  // aborted
    CurrentDevice current(device_.index);
    // An error ends this task (outside Estimator::train, which aborts on its own): peers may
    // wait in a collective this rank will never join, and finalizing would wait with them.
    if (std::uncaught_exceptions() > 0) {
      abort("an error ends this task");
      return;
    }
    {
      // Finalize flushes outstanding work; bounded like any wait, then destroyed.
      try {
        check_nccl(ncclCommFinalize(comm_), "ncclCommFinalize", comm_);
        wait_for_comm("finalizing the communicator");
        ncclCommDestroy(comm_);
        return;
      } catch (const std::exception& e) {
        LOG(WARNING) << "NCCL rank " << rank_ << ": " << e.what() << "; aborting instead";
      }
    }
    abort("destroying the communicator after a failed finalize");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }
  const char* transport() const override { return "NCCL"; }

  void sum(float* data, size_t count) override { all_reduce(data, count, ncclFloat32); }
  void sum(double* data, size_t count) override { all_reduce(data, count, ncclFloat64); }
  void sum(const Tensor& tensor) override {
    check_summable(tensor, "NCCL sum");
    all_reduce(tensor.raw_data(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()));
  }

  void queue_sum(const Tensor& tensor) override {
    static constexpr char kCall[] = "ncclAllReduce (queued)";
    check_summable(tensor, "NCCL queue_sum");
    if (tensor.numel() == 0) return;
    CurrentDevice current(device_.index);
    backend::cuda::DeviceRuntime& rt = backend::cuda::runtime(device_.index);
    if (queue_.stream == nullptr) {
      // The highest priority: a bucket's sum starts as soon as its gradients are in,
      // ahead of backward kernels queued meanwhile.
      int least = 0, greatest = 0;
      check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                 "cudaDeviceGetStreamPriorityRange");
      check_cuda(cudaStreamCreateWithPriority(&queue_.stream, cudaStreamNonBlocking, greatest),
                 "cudaStreamCreateWithPriority");
      queue_.device = device_.index;
    }
    rt.order_after(queue_.stream, rt.compute());
    {
      MutexLock lock(mutex_);
      throw_if_aborted_locked(kCall);
      check_nccl(
          ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                        nccl_type(tensor.dtype()), ncclSum, comm_, queue_.stream),
          kCall, comm_);
    }
    queued_ = true;
    wait_for_comm(kCall);  // a non-blocking communicator may still be enqueuing
  }

  void wait_queued() override {
    if (!queued_) return;
    CurrentDevice current(device_.index);
    backend::cuda::DeviceRuntime& rt = backend::cuda::runtime(device_.index);
    queued_ = false;
    wait_for_event("the queued ncclAllReduce calls", rt, rt.record(queue_.stream));
    rt.order_after(rt.compute(), queue_.stream);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    run("ncclBroadcast", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclBroadcast(data, data, bytes, ncclUint8, root, comm, stream);
    });
  }

  void abort(const std::string& reason) override {
    MutexLock lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = reason;
    LOG(WARNING) << "NCCL rank " << rank_ << " of " << size_ << " on " << device_
                 << ": aborting the communicator: " << reason;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  void all_reduce(void* data, size_t count, ncclDataType_t type) {
    if (count == 0) return;
    run("ncclAllReduce", [&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllReduce(data, data, count, type, ncclSum, comm, stream);
    });
  }

  // Enqueues op(communicator, stream) on the device's compute stream and waits for it with
  // the deadline.
  template <typename Op>
  void run(const char* call, Op&& op) {
    CurrentDevice current(device_.index);
    backend::cuda::DeviceRuntime& rt = backend::cuda::runtime(device_.index);
    {
      MutexLock lock(mutex_);
      throw_if_aborted_locked(call);
      check_nccl(op(comm_, rt.compute()), call, comm_);
    }
    wait_for_comm(call);  // a non-blocking communicator may still be enqueuing
    wait_for_event(call, rt, rt.record(rt.compute()));
  }

  // Waits for `done` (an event of rt's pool) with the deadline, then releases it.
  void wait_for_event(std::string_view what, backend::cuda::DeviceRuntime& rt, cudaEvent_t done) {
    try {
      wait(what, [&] {
        cudaError_t status = cudaEventQuery(done);
        if (status == cudaErrorNotReady) {
          cudaGetLastError();
          return false;
        }
        check_cuda(status, str_cat(what, " (waiting for the device)"));
        return true;
      });
    } catch (...) {
      rt.release_event(done);
      throw;
    }
    rt.release_event(done);
  }

  void check_summable(const Tensor& tensor, std::string_view what) const {
    if (tensor.device() != device_ || !tensor.is_contiguous()) {
      throw InvalidArgumentError(str_cat(what, ": expected a contiguous tensor on ", device_,
                                         ", got one on ", tensor.device()));
    }
  }

  // NCCL's state of the communicator: ncclInProgress while an operation is being enqueued
  // (or the communicator built), an error once one occurred. Throws AbortedError after an
  // abort.
  ncclResult_t state(std::string_view what) {
    MutexLock lock(mutex_);
    throw_if_aborted_locked(what);
    ncclResult_t state = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
    return state;
  }

  // Waits until the communicator is no longer in progress.
  void wait_for_comm(std::string_view what) {
    wait(what, [&] {
      ncclResult_t s = state(what);
      if (s == ncclInProgress) return false;
      check_nccl(s, what, nullptr);
      return true;
    });
  }

  // Polls `done` until it is true, checking for NCCL's asynchronous errors (a peer's
  // connection lost), reported peer failures and the deadline; aborts on any of them.
  template <typename Done>
  void wait(std::string_view what, Done&& done) {
    auto deadline = Clock::now() + std::chrono::duration<double>(options_.timeout_seconds);
    for (int spins = 0;; ++spins) {
      try {
        if (done()) return;
        ncclResult_t s = state(what);
        if (s != ncclSuccess && s != ncclInProgress) check_nccl(s, what, nullptr);
      } catch (const AbortedError&) {
        throw;
      } catch (const Error& e) {
        abort(e.what());
        throw AbortedError(
            str_cat("NCCL rank ", rank_, " of ", size_, " on ", device_, ": ", e.what()));
      }
      if (options_.peer_failure) {
        if (std::string failure = options_.peer_failure(); !failure.empty()) {
          abort(failure);
          throw AbortedError(str_cat("NCCL rank ", rank_, " of ", size_, " on ", device_, ": ",
                                     what, " interrupted: ", failure));
        }
      }
      if (Clock::now() > deadline) {
        std::string reason = str_cat(what, " did not finish within ", options_.timeout_seconds,
                                     " s (a peer may be gone or stalled)");
        abort(reason);
        throw DeadlineExceededError(
            str_cat("NCCL rank ", rank_, " of ", size_, " on ", device_, ": ", reason));
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  void throw_if_aborted_locked(std::string_view what) CADRE_REQUIRES(mutex_) {
    if (!aborted_) return;
    throw AbortedError(str_cat("NCCL rank ", rank_, " of ", size_, " on ", device_, ": ", what,
                               " on an aborted communicator (", abort_reason_, ")"));
  }

  int rank_, size_;
  Device device_;
  NcclOptions options_;
  Mutex mutex_;  // NCCL calls on comm_ and abort() exclude each other
  ncclComm_t comm_ CADRE_GUARDED_BY(mutex_) = nullptr;  // once constructed
  bool aborted_ CADRE_GUARDED_BY(mutex_) = false;
  std::string abort_reason_ CADRE_GUARDED_BY(mutex_);
  // Where queue_sum queues; made on first use, destroyed with the communicator (after the
  // destructor's finalize or abort has ended its work).
  struct Stream {
    cudaStream_t stream = nullptr;
    int device = 0;
    ~Stream() {
      if (stream == nullptr) return;
      CurrentDevice current(device);
      cudaStreamDestroy(stream);
    }
  } queue_;
  bool queued_ = false;  // sums queued since the last wait_queued()
};

}  // namespace

bool nccl_available() { return true; }

std::string nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof id.internal);
}

std::unique_ptr<GpuCollective> nccl_collective(const std::string& unique_id, int rank, int size,
                                               Device device, NcclOptions options) {
  check_gpu(device, "nccl_collective");
  if (unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    throw InvalidArgumentError(str_cat("nccl_collective: the unique id has ", unique_id.size(),
                                       " bytes, expected ", NCCL_UNIQUE_ID_BYTES,
                                       " (from nccl_unique_id())"));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgumentError(
        str_cat("nccl_collective: rank ", rank, " is not in [0, ", size, ")"));
  }
  return std::make_unique<NcclCollective>(unique_id, rank, size, device, std::move(options));
}

std::unique_ptr<GpuCollective> nccl_collective(Store& store, int rank, int size, Device device,
                                               NcclOptions options, const std::string& prefix) {
  check_gpu(device, "nccl_collective");
  std::string key = prefix + "/unique_id";
  std::string id;
  if (rank == 0) {
    id = nccl_unique_id();
    store.set(key, id);
  } else {
    id = store.get(key, options.timeout_seconds);
  }
  return nccl_collective(id, rank, size, device, std::move(options));
}

}  // namespace cadre
