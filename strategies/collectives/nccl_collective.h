// Collectives over GPU memory with NCCL.
//
// - GpuCollective: one rank of a communicator that spans processes (ncclCommInitRank), for
//   MultiWorkerMirroredStrategy. Rank 0 makes a unique id, the coordination service's
//   key-value store carries it to the others (nccl_collective(CoordinationClient&, ...)),
//   or the caller carries it as bytes itself. The communicator is non-blocking: every wait
//   polls with a deadline and a peer-failure check, and aborts the communicator
//   (ncclCommAbort) instead of hanging when a peer dies or a call times out.
// - LocalNcclGroup: communicators over several GPUs of this process (ncclCommInitAll), one
//   group call per all-reduce, for MirroredStrategy's NcclAllReduce.
//
// Buffers are device memory of the communicator's GPU; collectives run on that GPU's
// compute stream, so they are ordered after the kernels that produced their inputs and
// before those queued later. Built with CUDA only: without it nccl_available() is false
// and the factories throw UnimplementedError.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

class CoordinationClient;

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

// Thread-compatible: one thread at a time (NCCL calls on one communicator must not race).
class GpuCollective {
 public:
  virtual ~GpuCollective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;
  // In place, the element-wise sum over every rank of `count` elements of device memory;
  // returns when it is complete. Collective: every rank calls it with the same count, in
  // the same order. Throws AbortedError (a peer failed; the communicator is aborted),
  // DeadlineExceededError (timed out; aborted), InternalError (a CUDA or NCCL failure).
  virtual void sum(float* data, size_t count) = 0;
  virtual void sum(double* data, size_t count) = 0;
  // A contiguous float32/float64 tensor on device().
  virtual void sum(const Tensor& tensor) = 0;
  // In place, root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
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

// The same, with the id passed through the coordination service's key-value store: rank 0
// makes it and sets `prefix`/unique_id; the others get it (waiting up to the timeout).
// Peer failures reported by the service abort waits.
std::unique_ptr<GpuCollective> nccl_collective(CoordinationClient& store, int rank, int size,
                                               Device device, double timeout_seconds,
                                               const std::string& prefix = "nccl");

// Thread-compatible.
class LocalNcclGroup {
 public:
  virtual ~LocalNcclGroup() = default;
  virtual const std::vector<Device>& devices() const = 0;
  // In place: buffers[r] (contiguous, on devices()[r], one shape and dtype for all) become
  // their element-wise sum, in one NCCL group call. Ordered on each device's compute
  // stream; returns without waiting for the devices.
  virtual void all_reduce_sum(const std::vector<Tensor>& buffers) = 0;
};

// Communicators over distinct GPUs of this process. Throws InvalidArgumentError naming a
// device that is not a GPU or appears twice.
std::unique_ptr<LocalNcclGroup> local_nccl_group(const std::vector<Device>& devices);

}  // namespace cadre
