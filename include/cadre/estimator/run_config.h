// RunConfig: where and how an Estimator runs, with TensorFlow's defaults.
//
//   RunConfig config;
//   config.model_dir = "runs/mnist";
//   config.save_checkpoints_steps = 500;
//
// The cluster fields describe this process's place in a job; without TF_CONFIG (local
// mode) it is the one worker, and the chief.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cadre/base/env.h"
#include "cadre/estimator/planned_stop.h"
#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/strategy.h"

namespace cadre {

struct RunConfig {
  // Checkpoints, summaries and eval results go here. Required by train() and evaluate().
  std::string model_dir;
  // Seeds variable initialisation, dropout and whatever model_fn draws from the current
  // generator. Unset: a random seed, logged, so that a run can be repeated.
  std::optional<uint64_t> tf_random_seed;
  // Checkpoint every this many steps, or every this many seconds; setting both is an
  // error, and neither means every 600 seconds. A checkpoint is always written when
  // train() ends.
  std::optional<int64_t> save_checkpoints_steps;
  std::optional<double> save_checkpoints_secs;
  int keep_checkpoint_max = 5;                   // 0 keeps every checkpoint
  double keep_checkpoint_every_n_hours = 10000;  // TensorFlow's default: effectively off
  // Write checkpoints in the background: training waits only while the input position
  // and the list of variables are taken (tens of microseconds), not for the copy of the
  // variables and slots, the file, its checksums and syncs. A background thread copies the
  // variables while the next step's forward pass runs; an update that reaches a variable
  // before the copy does makes the copy itself, the built-in optimizers in the same pass
  // as the update (core/nn/deferred_copy.h), so the checkpoint holds the values of its
  // step. A save due while the previous one is still
  // being written waits for it. Saving listeners see each checkpoint only once it is
  // published. false: every save blocks training until the checkpoint is published.
  bool async_checkpoint = true;
  // How old, in seconds, the newest checkpoint on disk (fsynced) may be when a save
  // publishes: saves in between are published from the page cache and fsynced only if
  // they outlive retention long enough for the kernel to write them back. A killed
  // process loses nothing either way; a machine that loses power resumes from a checkpoint
  // at most this old (plus one save interval). The last checkpoint of train() is durable
  // when train() returns. 0: fsync every save (TensorFlow fsyncs none).
  double checkpoint_durable_secs = 30;
  // Let training choose its intra-op thread count, up to the budget
  // (set_intra_op_threads, CADRE_NUM_THREADS, else every core), from the step times it
  // sees: when another process takes a core, fewer threads run faster than threads that
  // wait for one another (core/runtime/thread_tuner.h). Single-worker runs only. Matrix
  // products, chunked kernels and Cadre's own convolution gradients (one input channel, or
  // 8-32 with at least twice as many outputs: the Fashion-MNIST CNN) give the same bits at
  // any count; oneDNN's, for other convolutions, may not: false keeps the count fixed for
  // bit-reproducible runs of those.
  bool intra_op_autotune = true;
  // Read the training input as this many virtual shards (io/virtual_shards.h), chosen when
  // a job first starts and kept in its checkpoints: a job resumed with another number of
  // workers (MultiWorkerMirrored, Mirrored or one device, at most this many workers) then
  // reads every element of an epoch once, since each shard keeps its own position and
  // moves whole to its new owner. The input_fn sees this many input pipelines and replicas
  // (per_replica_batch_size is a shard's share of the global batch, which it must divide),
  // and each step takes one batch of every shard. 0: one pipeline per worker, whose
  // positions are kept only while the number of workers stays the same (as in TensorFlow,
  // which keeps none). A checkpoint's own number wins over this one.
  int64_t input_shards = 0;
  // Deterministic training (needs input_shards, and one replica per worker): each step runs
  // model_fn on every input shard's rows separately, with a random stream of the shard and
  // the step, and adds the shards' gradients in shard order, so that the trajectory is the
  // same bits whether the job ran on 1, 2 or 4 workers or was resized part-way. It costs a
  // model_fn call per shard and a gather of every shard's gradients instead of an
  // all-reduce (docs/BENCHMARKS.md, Deterministic steps). Off, as TensorFlow's
  // enable_op_determinism.
  bool deterministic = false;
  int64_t log_step_count_steps = 100;  // progress line and global_step/sec every this many steps
  int64_t save_summary_steps = 100;    // 0: no training summaries
  // Coordinator mode (a "client" task, docs/DEPLOY.md): the steps the client hands a worker
  // at a time (TensorFlow's steps_per_execution). A worker that dies costs at most the
  // unfinished part of one unit, which another worker then runs.
  int64_t steps_per_unit = 10;
  // Coordinator mode with collective workers (no ps tasks): how often the client restarts
  // the workers' collective after one of them failed before it gives up.
  int client_max_restarts = 10;
  // Coordinator mode with ps tasks: the client gives up (UnavailableError) when every worker
  // has been lost this long, rather than wait for ever for workers that cannot start.
  double client_all_workers_lost_secs = 600;
  // A progress line that redraws itself in place on stderr (ProgressLineHook), besides the
  // log lines: kAuto draws it when stderr is a terminal.
  enum class ProgressLine { kAuto, kOn, kOff };
  ProgressLine progress_line = ProgressLine::kAuto;
  // Profiling (ProfilerHook, cadre/estimator/profiler_hook.h). Every this many steps, one
  // summary in the log of where those steps spent their time: per phase (input, forward,
  // backward, all_reduce, update, checkpoint, ...) and the kernels that took longest. 0: off.
  int64_t profile_every_n_steps = 0;
  // The steps that start at global steps [first, last) are traced into a Chrome trace,
  // model_dir/profile/trace-<first>.json (the chief only), for https://ui.perfetto.dev or
  // chrome://tracing. Unset: no trace. While neither is on, the profiler records nothing and
  // a kernel call costs one predictable branch more.
  std::optional<std::pair<int64_t, int64_t>> profile_trace_steps;
  // Every file the Estimator writes or publishes (checkpoint state, leases, summaries,
  // exports, the training-finished marker) goes through this; null: the real file system.
  std::shared_ptr<Env> env;
  // What asks for a planned stop, which ends training with a checkpoint of the step reached
  // and PlannedStopError (cadre/estimator/planned_stop.h): SIGTERM and SIGINT by default.
  PlannedStopOptions planned_stop;

  // How training and evaluation are distributed over devices (and, later, workers); null:
  // OneDeviceStrategy on cpu:0. Evaluation may use another strategy than training, and a
  // checkpoint saved under one strategy resumes under any other.
  std::shared_ptr<const Strategy> train_distribute;
  std::shared_ptr<const Strategy> eval_distribute;

  // This process's cluster, as TF_CONFIG gives it; unset in local mode. The fields below
  // follow from it (for_cluster), as TensorFlow's RunConfig derives them.
  std::optional<ClusterConfig> cluster;
  std::string task_type = "worker";  // "chief", "worker", "ps", "evaluator", "client"
  int task_id = 0;
  bool is_chief = true;
  int num_worker_replicas = 1;  // tasks that train: the chief and the workers (0 on the evaluator)
  int num_ps_replicas = 0;

  // A RunConfig whose cluster fields come from `cluster`.
  static RunConfig for_cluster(const ClusterConfig& cluster);
  // Reads TF_CONFIG from the environment, else a Slurm job step of several tasks (see
  // cluster_from_slurm), else local mode; throws InvalidArgumentError naming the field at
  // fault. Call it at the edge of a program, in main, as the library reads no environment
  // itself.
  static RunConfig from_environment();

  // `env`, or the real file system when it is null.
  std::shared_ptr<Env> file_system() const;
  // Seconds between checkpoints after resolving the defaults (0 when steps are used).
  double checkpoint_secs() const;
  // Throws InvalidArgumentError naming the field and its value when a field is out of range
  // or both checkpoint intervals are set.
  void validate() const;
};

}  // namespace cadre
