// The half of a strategy that the framework drives and users do not call (tf.distribute's
// StrategyExtended): where variables live and how a step reaches them, and what workers
// exchange. A Strategy owns one and answers its user API with it; ReplicaContext, the
// Estimator and tools reach it through Strategy::extended().
//
// Each strategy implements where its variables live (variable_device, mirrors_variables)
// and overrides the rest where it differs from the defaults, which suit one process whose
// replicas hold or share the variables in its own memory:
//
//   create_variables   makes the stores of a run (by default through copy_creators);
//   before_run         first thing in every Strategy::run (parameter servers: pull);
//   update_shared      the optimizer's update of variables the replicas share, called once
//                      on replica 0 after the gradients are reduced (parameter servers:
//                      push them instead);
//   global_step_after  the global step reached by a step taken at `step`;
//   variables_to_save  the logical variables a checkpoint holds, whole;
//   cross_worker_sum, broadcast_from_chief, all_gather_bytes, take_step_signal,
//   begin_gradients/gradient_ready/finish_gradients
//                      collectives across the workers of a job.
//
// Immutable after creation, like the Strategy that owns it; the hooks are thread-safe
// where their callers need it (update_shared and cross_worker_sum run on a replica thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/nn/optimizer.h"
#include "cadre/nn/variable_store.h"
#include "cadre/strategies/cross_device_ops.h"
#include "cadre/strategies/distributed_variables.h"
#include "cadre/tensor/device.h"

namespace cadre {

namespace ps {
class ParameterServers;
}
class Store;

// A part of a sharded checkpoint that a task holding variables writes itself: the slices
// of logical variables and slots it holds (as checkpoint::PartSlice), and a wait that
// returns its size and CRC-32C once it is durable.
struct SavedPartSlice {
  std::string name, slot_of;
  DType dtype = DType::kFloat32;
  Shape shape;  // of the whole logical variable
  int64_t first_row = 0, rows = 0;
};
struct SavedPart {
  std::string file_name;
  std::vector<SavedPartSlice> slices;
  std::function<std::pair<uint64_t, uint32_t>()> wait;
};

// Where a variable that a run restores can be read by the tasks that hold it: the
// checkpoint's file name in model_dir and the variable's name there.
struct VariableSource {
  std::string checkpoint;
  std::string name;
};
// The source of a variable being created, or nullopt when the creator alone makes it. Throws
// InvalidArgumentError for a variable the checkpoint cannot restore (another model).
using VariableSourceFn = std::function<std::optional<VariableSource>(const nn::VariableSpec&)>;

class StrategyExtended {
 public:
  virtual ~StrategyExtended();
  StrategyExtended(const StrategyExtended&) = delete;
  StrategyExtended& operator=(const StrategyExtended&) = delete;

  // The devices of this process, one replica each, and how their values are combined.
  const std::vector<Device>& devices() const { return devices_; }
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }

  // The job: workers training together, this one's index, and how many step together.
  virtual int num_workers() const { return 1; }
  virtual int worker_index() const { return 0; }
  virtual int num_workers_in_sync() const { return num_workers(); }
  // Training on this worker failed with `error` (the framework calls this as the error
  // leaves train()): the workers stepping with it must not wait for it in their next
  // collective. Under MultiWorkerMirrored this worker reports the error to the coordination
  // service and leaves the group at once, whoever later handles the error, and the strategy
  // cannot train again in this process.
  virtual void leave_after_error(const std::string& error) const {}
  // Training on this worker ended at a planned stop (PlannedStopError; on the chief, once
  // its checkpoint is durable). Under MultiWorkerMirrored the worker passes the
  // coordination service's planned-stop barrier (up to `timeout_seconds`; a failure is
  // logged), so that a service that outlives the workers (a coordinator-mode client's)
  // takes their restart for a new round rather than a failure.
  virtual void leave_after_planned_stop(double timeout_seconds) const {}
  int num_replicas_in_sync() const { return num_local_replicas() * num_workers_in_sync(); }
  // Across workers, in place: sums each value over the workers, and `weight` too (every
  // worker calls it with the same values in the same order; collective). Nothing to do for
  // a single worker.
  virtual void cross_worker_sum(std::vector<Gradient>& values, double& weight) const {}
  // How a step's gradients are combined, for the line a training run starts with
  // ("HierarchicalCopyAllReduce over 2 replicas", "Gloo across 2 workers", ...).
  virtual std::string reduction() const;
  // Every worker's `bytes`, in worker order (collective).
  virtual std::vector<std::string> all_gather_bytes(std::string bytes) const { return {bytes}; }
  // Step signals: a worker raises them before a step (the chief kCheckpoint, when a
  // checkpoint of the step follows; any worker kStop, when a planned stop was asked of it),
  // and after the step take_step_signal() tells every worker which any worker raised, and
  // clears them. Workers that step together carry them in the step's gradient reduction, so
  // that they cost nothing; take_step_signal() is collective there (every worker calls it
  // after every step). Under ParameterServer, kStop also when a ps task said so in a
  // response (its own planned stop, or the chief's: announce_planned_stop).
  static constexpr unsigned kCheckpoint = 1, kStop = 2;
  void raise_step_signal(unsigned signals) const { signal_raised_ |= signals; }
  virtual unsigned take_step_signal() const { return signal_raised_.exchange(0); }
  // This task stops at a planned stop after its last step, without stepping again. Under
  // ParameterServer the chief, which saves the checkpoint of its step next, tells the ps
  // tasks, and they tell every worker to stop after its step (in the response to its next
  // pull or push), so that no worker's step lands after the checkpoint and is lost; a ps
  // task it cannot reach is logged, not thrown.
  virtual void announce_planned_stop() const {}
  // Gradients summed across workers while the backward pass runs (gradient_buckets.h), for
  // strategies that can (MultiWorkerMirrored with one local replica and host memory):
  // begin_gradients() before the pass with this worker's weight and the scalars to sum
  // with it, gradient_ready() for each final gradient (the tape's hook), then
  // finish_gradients() returns the sums and replaces weight and scalars by theirs; the
  // caller may overwrite a dense sum in place (the buckets' memory, valid until the next step).
  // Collective: every worker in the same order, each step.
  virtual bool overlaps_gradients() const { return false; }
  virtual void begin_gradients(const std::vector<Tensor>& sources, double weight,
                               const std::vector<double>& scalars) const {}
  virtual void gradient_ready(size_t source, const Gradient& gradient) const {}
  virtual std::vector<Gradient> finish_gradients(double& weight,
                                                 std::vector<double>& scalars) const {
    return {};
  }
  // The chief's `value` on every worker (collective), e.g. the step a run starts at.
  virtual int64_t broadcast_from_chief(int64_t value) const { return value; }
  // Elastic MultiWorkerMirrored (CoordinationOptions.elastic), where the workers stepping
  // together are the members of a generation of the group (strategies/cluster/membership.h):
  // - elastic(): whether the group is one;
  // - group_changed(): the members changed since this worker joined them; at a step
  //   boundary it then joins the next generation;
  // - rejoin(after_failure): joins the newest generation, after a step that failed in a
  //   collective or at such a boundary; false where the group cannot go on (not elastic,
  //   or the failure was not the group's), and the caller goes on as it would have;
  //   OutOfRangeError when the others finished training meanwhile;
  // - joining_late(): this worker was restarted into a running group: it steps alone
  //   (creating its slots) until it first rejoins;
  // - workers_by_rank(): each rank's worker index (ranks are places among the members, in
  //   the order of all_gather_bytes); broadcast_bytes: from a rank, to every member.
  virtual bool elastic() const { return false; }
  virtual bool group_changed() const { return false; }
  virtual bool rejoin(bool after_failure) const { return false; }
  virtual bool joining_late() const { return false; }
  virtual std::vector<int> workers_by_rank() const;
  virtual void broadcast_bytes(void* data, size_t bytes, int root) const {}
  // The cluster's ps tasks when the variables live there, else null: a ps task serves with
  // their options, and a cluster with ps tasks needs a strategy that has them.
  virtual const ps::ParameterServers* parameter_servers() const { return nullptr; }

  // Where replica r's copy of the variables lives, and whether each replica has its own.
  virtual Device variable_device(int replica) const = 0;
  virtual bool mirrors_variables() const = 0;
  // See Strategy::create_variables. By default one store per replica when mirroring (each
  // variable made by copy_creators()[r] on replica r's variable device), else one.
  virtual std::unique_ptr<DistributedVariables> create_variables(uint64_t seed,
                                                                 nn::VariableCreator creator) const;
  // create_variables for a restore: `creator` restores every variable, and `sources` says
  // where each is in model_dir, so that a strategy whose tasks read their own share of a
  // variable (parameter servers: a ps task its rows) skips the creator for it, and no process
  // reads the whole variable. By default create_variables(seed, creator).
  virtual std::unique_ptr<DistributedVariables> create_restored_variables(
      uint64_t seed, nn::VariableCreator creator, VariableSourceFn sources) const {
    return create_variables(seed, std::move(creator));
  }

  // The parts of a step that depend on where variables live; see the file comment.
  virtual void before_run(DistributedVariables& variables) const {}
  virtual void update_shared(DistributedVariables& variables, nn::Optimizer& optimizer,
                             std::vector<Gradient> gradients,
                             const std::vector<nn::Variable*>& targets) const;
  virtual int64_t global_step_after(DistributedVariables& variables, int64_t step) const {
    return step + 1;
  }
  // By default the primary store (replica 0's copies), not owned by the result.
  virtual std::shared_ptr<const nn::VariableStore> variables_to_save(
      DistributedVariables& variables) const;
  // Sharded checkpoints: how many parts the tasks holding the variables write themselves
  // (0: none, the caller saves variables_to_save whole), and save_parts, which has each
  // write part k of the checkpoint of `step` as `directory`/part_names[k] and returns the
  // variables the caller saves itself, and in `parts` what each part holds and how to wait
  // for it (checkpoint::CheckpointPart, which the caller makes of it).
  virtual int checkpoint_parts(DistributedVariables& variables) const { return 0; }
  virtual std::shared_ptr<const nn::VariableStore> save_parts(
      DistributedVariables& variables, const std::string& directory,
      const std::vector<std::string>& part_names, int64_t step,
      std::vector<SavedPart>* parts) const;
  // Sharded checkpoints that the workers write, each a share of the variables they all hold
  // (MultiWorkerMirrored): how many workers write a part when the variables (without their
  // slots) take `bytes` (0: the chief saves them whole), alike on every worker; and the
  // store through which each worker tells the chief how its part ended (the coordination
  // service's, whose reads fail at once when the cluster fails), null when there is none.
  virtual int worker_checkpoint_parts(int64_t bytes) const { return 0; }
  virtual Store* part_store() const { return nullptr; }

 protected:
  // Throws InvalidArgumentError listing the available devices for an unknown device, one
  // named twice, or none. cross_device_ops null: HierarchicalCopyAllReduce.
  StrategyExtended(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> cross_device_ops);
  // The creator of each of `copies` stores of one create_variables call, given the caller's;
  // by default the caller's for every copy.
  virtual std::vector<nn::VariableCreator> copy_creators(nn::VariableCreator creator,
                                                         int copies) const;

  // The signals as one number that sums over workers (kCheckpoint counts 1, kStop 4096:
  // exact in float32 for fewer than 4096 workers), and the signals a sum carries.
  static double encode_step_signals(unsigned signals);
  static unsigned decode_step_signals(double sum);

  mutable std::atomic<unsigned> signal_raised_{0};  // by this worker, for the coming step

 private:
  std::vector<Device> devices_;
  std::shared_ptr<CrossDeviceOps> cross_device_ops_;
};

// MirroredStrategy's: a replica per device of `devices` (empty: every GPU, else cpu:0), each
// with a copy of every variable, nothing shared with other processes. `ops` null: chosen by
// the devices, as MirroredStrategy::create does.
std::unique_ptr<StrategyExtended> local_mirrored_extended(
    std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> ops = nullptr);

}  // namespace cadre
