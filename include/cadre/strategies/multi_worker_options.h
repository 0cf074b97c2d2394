// How the training tasks of a cluster join each other (MultiWorkerMirroredStrategy, and
// anything else that joins a worker group): how long they wait for each other, and the
// coordination service's heartbeats that tell the survivors when a task dies.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cadre {

struct CoordinationOptions {
  double heartbeat_interval_seconds = 1;
  // A task silent for this long is declared dead, and every other task told so.
  double heartbeat_timeout_seconds = 10;
  double log_every_seconds = 5;  // progress of registration and barriers
  // Elastic MultiWorkerMirrored (RunConfig.elastic): a worker declared dead leaves the
  // group, which the others re-form without it, and a restarted worker is admitted back,
  // instead of the cluster failing. Not for the task that hosts the service (the chief).
  bool elastic = false;
};

struct MultiWorkerOptions {
  double registration_timeout_seconds = 300;  // for every task to register
  double collective_timeout_seconds = 300;    // for peers in one collective
  // Host-memory collectives between workers of one host go through a shared-memory segment
  // (several GB/s, microseconds per call) instead of Gloo's TCP over loopback; false keeps
  // TCP. Workers on several hosts use Gloo either way.
  bool shared_memory = true;
  // With one local replica, gradients are summed across workers in buckets, in the order
  // the backward pass finishes them (the reverse of the variables' in the first step, then
  // the order seen in it; the first bucket up to first_bucket_bytes, the others up to
  // bucket_bytes), while the backward pass still runs, as PyTorch DDP does: on a GPU by
  // NCCL on a stream beside the backward kernels, on the CPU when the workers are on
  // several hosts (on one host, shared memory is work for the same cores, so the buckets
  // are summed after the pass). false sums the same buckets after the pass: the same bits,
  // later.
  bool overlap_gradients = true;
  size_t bucket_bytes = size_t{25} << 20;
  size_t first_bucket_bytes = size_t{1} << 20;
  // Between hosts, a gradient of rank >= 2 larger than this is summed in pieces of whole
  // rows, about this size each, a bucket each; a dense layer's kernel is then built piece
  // by piece, each piece sent while the next is built (the first dense layer's kernel is
  // the pass's last gradient, and often its largest). 0 (the default): whole. Building by
  // pieces costs compute (6% more for the MLP's first kernel at batch 1024), so it pays
  // only where the network, not the cores, carries the bytes
  // (docs/BENCHMARKS.md#distributed-scaling).
  size_t piece_bytes = 0;
  // Checkpoints of variables (without slots) of at least this many bytes are sharded: each
  // worker writes a share of the variables and their slots as its own part of the
  // checkpoint, in parallel and while training goes on, and the chief commits the parts
  // (checkpoint/FORMAT.md, Sharded checkpoints). Smaller ones are one file the chief writes,
  // cheaper for a few megabytes. 0: always sharded; negative: never.
  int64_t sharded_checkpoint_min_bytes = int64_t{16} << 20;
  CoordinationOptions coordination;
};

}  // namespace cadre
