// What one ps task holds and does, without the transport: variables (whole, or row slices
// of partitioned ones), their optimizer slots, and the updates workers push, applied with
// the optimizer they describe; one ps also holds the global step. ParameterServer serves a
// Shard over gRPC (ps_server.h); tests call it in-process. Requests and responses are
// ps.proto's messages, so that the service only carries them.
//
// - Variables are created by the chief, with the value it restored or initialised, with
//   the checkpoint rows the shard reads itself (RestoreRows: a restore streams through every
//   ps task, not through the chief), or with the built-in initializer the shard fills its
//   rows from (InitialFill: a fresh start's table is never whole in one process); other workers'
//   creations wait until the chief has given it (TensorFlow's workers wait for the chief to
//   initialise the model). A chief that comes again (restarted) replaces values.
// - Updates of one variable are atomic with respect to each other and to reads; different
//   variables update in parallel.
// - A worker's first push for a variable waits until the chief has sent that variable's
//   optimizer state (restored slots or fresh ones), so that every update starts from it.
//
// Thread-safe. Errors are Cadre's typed errors, naming the task: InvalidArgumentError for a
// bad request, NotFoundError for an unknown variable, DeadlineExceededError when what a call
// waits for does not come within its timeout, UnavailableError once stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/nn/variable_store.h"
#include "strategies/ps/entry.h"
#include "strategies/ps/input_positions.h"
#include "strategies/ps/optimizer_table.h"
#include "strategies/ps/part_snapshot.h"
#include "strategies/ps/ps.pb.h"
#include "strategies/ps/unit_ledger.h"

namespace cadre::ps {

class Shard {
 public:
  // `task` names the shard in messages ("ps:0"); `read_rows` reads the rows the chief's
  // RestoreRows name (unset: such requests fail with FailedPreconditionError).
  explicit Shard(std::string task, RowRestorer read_rows = {});

  // The variable the request defines, with its initial value when one is given (the
  // chief's); without one, waits until the chief has given it. The value comes back when
  // asked for.
  CreateResponse create(const CreateRequest& request);
  // The values of the items, whole or the rows they name.
  PullResponse pull(const PullRequest& request);
  // Applies the gradients (after the chief's optimizer state, which it may carry) at the
  // next optimizer step, or at the request's step for a later part of a split push; adds
  // the deltas to non-trainable variables, and counts the global step when asked. A push
  // staler than its bound is dropped whole. A push from a worker's input pipeline counts
  // its batch and keeps the position it carries (input_positions.h).
  PushResponse push(const PushRequest& request);
  // Sets the global step (the chief, which then restored the input positions too: the
  // counts of input_positions() start again), or waits until it is set; returns it.
  int64_t global_step(const GlobalStepRequest& request);
  // The workers' input positions and the batches pushed since each, after recording the
  // end of the request's pipeline where it says so (input_positions.h), and the global step.
  InputPositionsResponse input_positions(const InputPositionsRequest& request);
  // The coordinator's ledger of units (unit_ledger.h): a new generation, or the steps
  // applied of units of the current one (FailedPreconditionError when it was replaced), and
  // the global step.
  UnitsResponse units(const UnitsRequest& request);
  // The values named, or without names what the shard holds (types and shapes only):
  // variables, slots, each optimizer's "<name>/iterations" and "global_step".
  ReadResponse read(const ReadRequest& request);

  // Marks a snapshot of every initialised variable with its slots, and the optimizers' step
  // counters, into `snapshot` (replacing what it held): each variable and its slots at one
  // moment, under the variable's lock. Small tensors are copied; the others are
  // copy-on-write (saved_tensor.h): their items read the values of the mark until
  // end_snapshot(), while updates keep aside the old rows they overwrite before the part has
  // read them. Marking costs O(variables), so updates hardly wait. One snapshot at a time:
  // the caller ends one before marking the next.
  void snapshot(PartSnapshot& snapshot);
  // Ends the snapshot: its items' reads no longer work, and what was kept aside is freed.
  void end_snapshot();

  // Ends every wait with UnavailableError, and makes later ones fail at once.
  void stop();
  // A line on what the shard holds and the pushes, pulls and dropped pushes since the last
  // report.
  std::string report();

 private:
  template <typename Pred>
  void wait_for(double timeout_seconds, Pred ready, const std::string& what) CADRE_REQUIRES(mutex_);
  Entry& entry_for(const VariableDef& def, const std::string& what) CADRE_REQUIRES(mutex_);
  // The batch of a push that counted (or was refused) the global step now in `response`,
  // counted for the worker's input pipeline, if any (input_positions.h).
  void count_batch(const PushRequest& request, PushResponse& response) CADRE_REQUIRES(mutex_);
  // The part of push() after the staleness and unit checks.
  PushResponse apply_push(const PushRequest& request, const std::vector<Entry*>& entries,
                          PushResponse response);
  void initialise(Entry& entry, const Tensor& value, const std::string& what)
      CADRE_REQUIRES(mutex_);
  Entry& initialised(const std::string& name);
  // The initialised entries a push names, each once.
  std::vector<Entry*> entries_to_update(const PushRequest& request) CADRE_REQUIRES(mutex_);
  // The chief's slots (`made`: those the shard read from a checkpoint or filled itself, by
  // name) and step counter for the variables it names.
  void take_optimizer_state(const PushRequest& request, const std::string& optimizer,
                            OptimizerState& state, const std::map<std::string, Tensor>& made)
      CADRE_REQUIRES(mutex_);
  // shard_restore.cc: the rows `rows` names, read into a new tensor of `dtype` and `shape`
  // (outside the shard's lock: a slice takes a while to come off the disk); and the slots a
  // chief's push names RestoreRows or an InitialFill for, read or filled, by name.
  Tensor read_restored(const RestoreRows& rows, DType dtype, const Shape& shape,
                       const std::string& what) const;
  std::map<std::string, Tensor> own_slots(const PushRequest& request) const;
  // Keeps aside for the snapshot being written what an update of the entries (each locked)
  // by `gradients` overwrites.
  static void keep_for_snapshot(const nn::Optimizer& optimizer, const std::vector<Entry*>& entries,
                                const std::vector<Gradient>& gradients);
  void apply(nn::Optimizer& optimizer, const std::vector<Entry*>& entries,
             const std::vector<Gradient>& gradients, int64_t step);
  void add_delta(const NamedTensor& delta);
  void list(ReadResponse* response);
  void read_one(const std::string& name, NamedTensor* out);

  const std::string task_;
  const RowRestorer read_rows_;
  Mutex mutex_;
  CondVar changed_;
  std::map<std::string, std::unique_ptr<Entry>> entries_ CADRE_GUARDED_BY(mutex_);
  OptimizerTable optimizers_ CADRE_GUARDED_BY(mutex_);
  std::optional<int64_t> global_step_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::vector<Entry*> snapshot_entries_ CADRE_GUARDED_BY(mutex_);         // those with `saving` set
  std::map<std::string, Filling> slot_filling_ CADRE_GUARDED_BY(mutex_);  // chunks of slots
  nn::VariableStore slots_;  // which optimizers find by name; each guarded by its entry
  UnitLedger units_;
  InputPositions positions_;
  std::atomic<int64_t> pushes_{0}, pulls_{0}, dropped_{0};
};

}  // namespace cadre::ps
