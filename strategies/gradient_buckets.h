// Gradients summed across workers in buckets while the backward pass still runs (PyTorch
// DDP's reducer): the tape announces each gradient as soon as it is final, the gradient is
// copied into its bucket, and a full bucket goes to a communication thread that all-reduces
// it while the training thread computes the next gradients. The optimizer waits only at
// finish(), which sums the last bucket itself (it fills with the pass's last gradient, so
// there is nothing left to overlap it with, and waking the thread for it costs a hand-off).
// Internal to the strategies module (MultiWorkerMirrored).
//
// Buckets hold the gradients in the order the backward pass finishes them, up to
// first_bucket_bytes for the first (so that communication starts early) and bucket_bytes
// for the others, and go out in that order on every worker. That order is the reverse of
// the variables' for the first step; from the second on it is the one worker 0 saw in its
// first (as PyTorch DDP rebuilds its buckets), since one op's backward can finish several
// variables at once (a fused dense layer's kernel and bias) and a bucket waits for its
// last member. The sums are those of the same buckets reduced after the backward pass
// (overlap off): the same bits.
//
// A gradient larger than piece_bytes goes in pieces of whole rows, a bucket each. The
// pass's last gradient is often its largest (the first dense layer's kernel, made last);
// when it comes unbuilt (GradientTape::announce), ready() builds it piece by piece, and
// each piece is summed while the next is built. The buckets are consecutive ranges of one
// buffer, so that a gradient in pieces is one tensor again at finish().
//
// On a GPU (NCCL) there is no communication thread: a full bucket's sum is queued on the
// communicator's own stream behind the kernels that filled it (GpuCollective::queue_sum),
// so that it runs on the device while the backward kernels queued after it do, and
// finish() waits for the queue.
#pragma once

#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/base/mutex.h"
#include "cadre/tensor/tensor.h"
#include "core/kernels/transfer.h"
#include "strategies/collectives/collective.h"
#include "strategies/collectives/nccl/collective.h"

namespace cadre {

struct BucketOptions {
  size_t bucket_bytes = size_t{25} << 20;       // DDP's default
  size_t first_bucket_bytes = size_t{1} << 20;  // DDP's first bucket
  // Gradients of rank >= 2 above this size go in pieces of about this size; 0: whole.
  size_t piece_bytes = 0;
  // false: every bucket is reduced at finish(), in the same order, on the caller's thread
  // (no communication thread).
  bool overlap = true;
};

// One step at a time: begin(), ready() for each gradient (from the tape's hook, on the
// training thread), finish(). Buckets are laid out again only when the sources' shapes
// change.
class GradientBuckets {
 public:
  // Buckets in host memory, summed by `collective` (on a thread of their own with overlap).
  GradientBuckets(ProcessCollective& collective, BucketOptions options);
  // Buckets in the memory of `gpus`' device, summed by it (queued with overlap); `host`
  // (the same processes) agrees on the buckets' order.
  GradientBuckets(GpuCollective& gpus, ProcessCollective& host, BucketOptions options);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // A step's reduction of one gradient per source, and of `extras` (scalars summed
  // alike, carried by the last bucket). Sources marked in `sparse` take no room in the
  // buckets: their gradients are kept for the caller to gather as rows.
  void begin(const std::vector<Tensor>& sources, std::vector<double> extras,
             const std::vector<bool>& sparse, double scale = 1);
  // Source i's gradient, times begin's `scale` (this worker's weight in a weighted mean);
  // undefined: it adds zeros and stays undefined. An unbuilt one is built here (by rows
  // when it goes in pieces).
  void ready(size_t i, const Gradient& gradient);
  // Waits for every bucket; returns the sums over the workers, as views of the buckets
  // (valid until the next begin()), and the summed extras; a sparse source's entry is this
  // worker's own rows, not yet summed. Rethrows the collective's error.
  std::vector<Gradient> finish(std::vector<double>& extras);

 private:
  struct Piece {
    size_t bucket = 0;
    int64_t row_begin = 0, row_end = 0;  // of the source's first dimension
    int64_t begin = 0, end = 0;          // elements of flat_
    Shape shape;
  };
  struct Slot {
    Shape shape;
    DType dtype = DType::kFloat32;
    bool defined = false;
    bool filled = false;
    bool sparse = false;        // no room in its bucket; `rows` holds it
    std::vector<Piece> pieces;  // one for a whole gradient (and a sparse one), in order
    Gradient rows;
  };
  struct Bucket {
    int64_t begin = 0, end = 0;  // elements of flat_
    size_t members = 0;          // pieces
    size_t pending = 0;
  };
  void lay_out(const std::vector<Tensor>& sources, const std::vector<bool>& sparse);
  // Worker 0's order of arrival in the last step, the same on every worker (collective).
  std::vector<size_t> agreed_arrival_order();
  void issue_ready_buckets() CADRE_REQUIRES(mutex_);
  void sum(size_t bucket);
  Tensor bucket(size_t bucket) const;
  // `part` times scale_ into `place`.
  void put(const Tensor& part, Tensor place) const;
  void piece_done(size_t bucket);
  void loop();

  ProcessCollective& collective_;   // sums the buckets
  ProcessCollective& host_;         // host memory: the order of the buckets
  GpuCollective* queue_ = nullptr;  // with overlap on a GPU: sums are queued on it
  BucketOptions options_;
  DType dtype_ = DType::kFloat32;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  Tensor flat_;                   // every bucket, then the extras
  std::vector<int64_t> layout_;   // the sources' sizes the buckets were laid out for
  std::vector<size_t> order_;     // the sources, first to last in the buckets
  std::vector<size_t> arrivals_;  // the sources in the order ready() got them this step
  bool reordered_ = false;        // order_ is the agreed order of arrival
  size_t extras_ = 0;
  double scale_ = 1;
  Transfer extras_upload_;  // keeps the extras' host copy until it has reached flat_

  Mutex mutex_;
  CondVar work_, done_;
  size_t issued_ CADRE_GUARDED_BY(mutex_) = 0;   // buckets handed to the thread
  size_t reduced_ CADRE_GUARDED_BY(mutex_) = 0;  // buckets it has summed
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::exception_ptr failure_ CADRE_GUARDED_BY(mutex_);
  std::thread thread_;  // with overlap only
};

}  // namespace cadre
