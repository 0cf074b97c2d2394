// Collectives over GPU memory with NCCL, across processes: one rank of a communicator
// (ncclCommInitRank) per process, for MultiWorkerMirroredStrategy. Rank 0 makes a unique
// id, and a Store carries it to the others (or the caller carries it as bytes itself).
// The communicator is non-blocking: every wait polls with a deadline and a peer-failure
// check, and aborts the communicator (ncclCommAbort) instead of hanging when a peer dies or
// a call times out.
//
// Buffers are device memory of the communicator's GPU; collectives run on that GPU's
// compute stream, so they are ordered after the kernels that produced their inputs and
// before those queued later, except queued sums, which run beside the later kernels on a
// stream of their own (gradient buckets summed while the backward pass goes on).
//
// NCCL comes with the CUDA backend. A build without it has nccl_available() false, and its
// factories (nccl/unavailable.cc) throw an error that says so.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "cadre/tensor/device.h"
#include "cadre/tensor/tensor.h"
#include "strategies/cluster/store.h"
#include "strategies/collectives/collective.h"

namespace cadre {

// Whether this build has NCCL (and the CUDA backend).
bool nccl_available();

struct NcclOptions {
  // A collective (or joining) that has not finished after this long aborts the
  // communicator and throws DeadlineExceededError.
  double timeout_seconds = 300;
  // Polled while waiting; a non-empty answer (e.g. CoordinationClient::failure(), naming a
  // dead task) aborts the communicator and throws AbortedError with it.
  std::function<std::string()> peer_failure;
};

// A new NCCL unique id (ncclGetUniqueId) as NCCL_UNIQUE_ID_BYTES bytes, made by one rank
// and given to every rank of the communicator.
std::string nccl_unique_id();

// ProcessCollective's operations on device memory of device(), which return when they are
// complete, and throw AbortedError (a peer failed; the communicator is aborted),
// DeadlineExceededError (timed out; aborted) or InternalError (a CUDA or NCCL failure).
class GpuCollective : public ProcessCollective {
 public:
  // In place, the sum over every rank of a contiguous float32/float64 tensor on device().
  virtual void sum(const Tensor& tensor) = 0;
  using ProcessCollective::sum;
  // Queues the same sum behind the work queued on the device's compute stream so far, on a
  // stream of the communicator's own, and returns without waiting for it: the sum runs
  // while the kernels queued after it do. The tensor must not be touched until
  // wait_queued() returns; the operations of one communicator are queued or called one
  // after another, from one thread.
  virtual void queue_sum(const Tensor& tensor) = 0;
  // Waits for every queued sum (with the deadline and the peer-failure check, as every
  // wait) and orders the compute stream after them. Returns at once when none is queued.
  virtual void wait_queued() = 0;
  // Aborts the communicator (ncclCommAbort): NCCL work in flight ends, later calls throw
  // AbortedError naming `reason`. Safe to call from another thread.
  virtual void abort(const std::string& reason) = 0;
};

// Joins a communicator of `size` ranks as `rank`, on GPU `device`, with a unique id from
// nccl_unique_id() (the same bytes on every rank). Returns when every rank has joined.
// Throws InvalidArgumentError for a bad id, rank or device, DeadlineExceededError when the
// others do not join within options.timeout_seconds.
std::unique_ptr<GpuCollective> nccl_collective(const std::string& unique_id, int rank, int size,
                                               Device device, NcclOptions options = {});

// The same, with the id passed through `store`: rank 0 makes it and sets
// `prefix`/unique_id; the others get it (waiting up to options.timeout_seconds).
std::unique_ptr<GpuCollective> nccl_collective(Store& store, int rank, int size, Device device,
                                               NcclOptions options,
                                               const std::string& prefix = "nccl");

}  // namespace cadre
