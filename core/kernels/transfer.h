// Host <-> device transfers that overlap with computation: the input pipeline's prefetch
// copies the next batch to the replica's device while the current step runs, and a
// checkpoint copies device variables to host memory while training goes on.
//
// On a GPU the copies run on the device's copy stream from page-locked ("pinned") host
// memory; the device orders them against its computation with events, so the host never
// waits for them unless it asks to. On CPU devices they are plain synchronous copies. (In
// the kernels layer: a source that is not contiguous is made so by the copy kernel.)
//
//   // prefetch thread:
//   Tensor staged = empty_pinned(batch.shape(), batch.dtype());
//   staged.assign(batch);                                   // host to pinned host
//   AsyncCopy next = to_device_async(staged, Device::gpu(0));
//   // training thread: use next.tensor at once; kernels on gpu:0 run after the copy.
//   // Reuse `staged` only after next.transfer.ready() (or wait()).
#pragma once

#include <memory>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"
#include "core/tensor/device_backend.h"

namespace cadre {

// A contiguous cpu:0 tensor in page-locked memory when a GPU backend is built (cached and
// reused like other host memory), ordinary host memory otherwise.
Tensor empty_pinned(const Shape& shape, DType dtype);

// The handle of an asynchronous copy. Copyable; keeps the copy's tensors alive until the
// last handle goes, and that last handle waits for the copy if it is still running, so
// that pinned memory is never reused under a transfer. A default-constructed Transfer is
// complete.
class Transfer {
 public:
  Transfer() = default;
  Transfer(std::unique_ptr<CopyEvent> event, std::vector<Tensor> keep_alive)
      : pending_(std::make_shared<Pending>(std::move(event), std::move(keep_alive))) {}
  // Whether the copy has finished; never blocks.
  bool ready() const { return pending_ == nullptr || pending_->event->ready(); }
  // Blocks until the copy has finished; throws the error it ended with.
  void wait() const {
    if (pending_ != nullptr) pending_->event->wait();
  }

 private:
  struct Pending {
    Pending(std::unique_ptr<CopyEvent> e, std::vector<Tensor> k)
        : event(std::move(e)), keep_alive(std::move(k)) {}
    ~Pending();
    std::unique_ptr<CopyEvent> event;
    std::vector<Tensor> keep_alive;
  };
  std::shared_ptr<Pending> pending_;
};

struct AsyncCopy {
  Tensor tensor;      // the destination, usable at once by work queued on its device
  Transfer transfer;  // when the source may be changed or released
};

// Starts copying host tensor `src` to a new tensor on `device`. Work queued on `device`
// after the call sees the copied values. `src` must not change until transfer.ready(). A
// source that is not contiguous is first made contiguous (synchronously, on the host). A
// source already on `device` is returned as it is. Not recorded on a gradient tape.
AsyncCopy to_device_async(const Tensor& src, Device device);

// Starts copying device tensor `src` into host tensor `dst` (cpu, contiguous, same shape
// and dtype; pinned for the copy to overlap). The copy reads `src` as the work queued so
// far leaves it; work queued on the device later waits for the copy before running, so
// training may go on updating `src` at once. `dst` holds the values once the transfer is
// ready. Throws InvalidArgumentError naming the mismatch when dst does not fit.
Transfer to_host_async(const Tensor& src, const Tensor& dst);

}  // namespace cadre
