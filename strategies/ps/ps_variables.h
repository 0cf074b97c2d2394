// The variables of one training run under ParameterServerStrategy, as a worker holds them:
// local copies in one host store that the replicas share, of variables that live on the ps
// tasks, and what keeps the two together: creation on the ps tasks (the chief's values),
// pulls before each step, pushes of gradients, and the logical view for checkpoints.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "cadre/nn/optimizer.h"
#include "cadre/strategies/distributed_variables.h"
#include "core/nn/initial_fill.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/placement.h"
#include "strategies/ps/ps_client.h"
#include "strategies/strategy_extended.h"

namespace cadre::ps {

class RowCache;

// Thread-safe: the replicas of a step create and read variables concurrently.
class PsVariables : public DistributedVariables {
 public:
  // `servers` (connected) outlive this object. The chief creates variables with `base`
  // (restoring them or initialising them) and gives the ps tasks their values, except for
  // the trainable row-access variables (and their slots) that `sources` names: each ps task
  // reads its slices of those from the checkpoint itself (unless a task cannot, having no
  // model_dir or another file system: then the chief sends them). On a fresh start (`base` is
  // nn::default_variable_creator) each ps task fills its own slices of the variables and
  // slots whose initializers are built-in ones (core/nn/initial_fill.h), bit for bit what
  // `base` makes, and the chief builds none of them. Other workers take the ps tasks' values.
  PsVariables(const ParameterServers& servers, bool chief, uint64_t seed, nn::VariableCreator base,
              VariableSourceFn sources = {});
  ~PsVariables() override;

  // Brings the local copies of the variables up to date (row-access ones lazily, by the rows
  // each step looks up).
  void pull();
  // Clips `gradients` as `optimizer` says and pushes them for `targets`; the ps tasks apply
  // the update. Records the global step ps 0 reports.
  void push(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
            const std::vector<nn::Variable*>& targets);
  int64_t global_step() const;
  // The chief's (or coordinator's) optimizer state for `targets`, sent to the ps tasks
  // without applying any gradient: what a coordinator that trains nothing itself does once
  // its variables exist, so that the workers' first pushes find it.
  void send_optimizer_state(nn::Optimizer& optimizer, const std::vector<nn::Variable*>& targets);
  // The logical variables, slots and step counters, read from the ps tasks and joined into
  // whole tensors, and the chief's local variables (integer counters that are not
  // trainable).
  std::shared_ptr<nn::VariableStore> gather();
  // Sharded checkpoints (ps_parts.cc): a part per ps task once the variables on them reach
  // ParameterServerOptions::sharded_checkpoint_min_bytes, else 0; and save_parts, which asks
  // every ps task to write its part and returns what the chief saves itself (its local
  // variables and the optimizers' step counters) and, in `parts`, what each part holds.
  int checkpoint_parts() const;
  std::shared_ptr<nn::VariableStore> save_parts(const std::string& directory,
                                                const std::vector<std::string>& part_names,
                                                int64_t step, std::vector<SavedPart>* parts);

 private:
  struct Remote {
    std::shared_ptr<nn::Variable> variable;  // the local copy
    std::vector<Slice> slices;
    std::shared_ptr<RowCache> rows;  // for row-access variables
    // A non-trainable variable's value as last pulled or pushed: the step's change to it is
    // pushed as the difference.
    Tensor synced;
  };

  std::shared_ptr<nn::Variable> create(const nn::VariableSpec& spec, uint64_t seed);
  std::shared_ptr<nn::Variable> create_remote(const nn::VariableSpec& spec, uint64_t seed);
  // ps_create.cc. Creates `slices` of a variable on their ps tasks; the chief gives them
  // `value`, or `fill` for them to compute their own; the others, and a chief that gave
  // `fill`, read the tasks' values into `value` (unless row access fetches rows later).
  void create_slices(const nn::VariableSpec& spec, const std::vector<Slice>& slices, Tensor& value,
                     const nn::InitialFill* fill = nullptr);
  void for_each_slice(const std::vector<Slice>& slices,
                      const std::function<void(const Slice&)>& fn);
  // Where the ps tasks can read `spec` themselves: nullopt when it is not restored, when
  // ParameterServerOptions::restore_on_ps_tasks is off, or once a task could not (no
  // model_dir, or not the chief's file system: restore_on_chief).
  std::optional<VariableSource> source_of(const nn::VariableSpec& spec) const;
  void restore_on_chief(const Error& why);
  // Runs `send` (requests that have ps tasks read rows themselves); false, and the chief
  // restores from then on, when a task could not read the checkpoint.
  bool sent_or_chief_restores(const std::function<void()>& send);
  // The chief's push of slot "<s.name><suffix>" of slice `s` (its value left to fill).
  PushRequest slot_push(const OptimizerSpec& optimizer, const Slice& s,
                        const std::string& suffix) const;
  // The chief's restore of variable `spec` (its `slices`), or of its variable `target`'s slot
  // `spec`, by the ps tasks: false when the chief must give the values itself.
  bool restore_on_ps(const nn::VariableSpec& spec, const std::vector<Slice>& slices);
  bool restore_slot_on_ps(const nn::VariableSpec& spec, const nn::Variable& target,
                          const std::vector<Slice>& slices, const OptimizerSpec& optimizer);
  // On a fresh start, has each ps task fill its slices of `target`'s slot `spec` from the
  // slot's built-in initializer (in `requests`, one per task), so that the chief never builds
  // an embedding table's accumulator: false when the chief must initialise it and send it.
  bool fill_slot_on_ps(const nn::VariableSpec& spec, const nn::Variable& target,
                       const std::vector<Slice>& slices, std::vector<PushRequest>& requests) const;
  // The chief's value `rows` of slice `s` (its slot "<s.name><suffix>"), sent in chunks of
  // about kFillChunkBytes (message_budget.h) when larger, so that a ps task holds a chunk's
  // message beside its share rather than a slice's.
  void send_value(const nn::VariableSpec& spec, const Slice& s, const Tensor& rows);
  void send_slot(const OptimizerSpec& optimizer, const Slice& s, const std::string& suffix,
                 const Tensor& rows);
  std::vector<Slice> slices_of(const nn::Variable& variable);
  // An optimizer split by variable name prefix (its config's kind "split"): each part's
  // optimizer with its gradients and targets. InvalidArgumentError for a target under no
  // prefix.
  struct Part {
    std::shared_ptr<nn::Optimizer> optimizer;
    std::vector<Gradient> gradients;
    std::vector<nn::Variable*> targets;
  };
  std::vector<Part> parts_of(const nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                             const std::vector<nn::Variable*>& targets);
  // push() of one optimizer's gradients; only the push that `counts_the_step` increments
  // the global step and carries a coordinator's unit.
  void push_part(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                 const std::vector<nn::Variable*>& targets, bool counts_the_step);
  // send_optimizer_state of one optimizer.
  void send_part_state(nn::Optimizer& optimizer, const std::vector<nn::Variable*>& targets);
  // A push request per ps task, with the optimizer and the step, and `gradients` cut into
  // their slices' items.
  std::vector<PushRequest> push_requests(const nn::Optimizer& optimizer,
                                         const std::vector<Gradient>& gradients,
                                         const std::vector<nn::Variable*>& targets);
  // The changes this step made to non-trainable variables, as deltas in `requests`.
  void add_deltas(std::vector<PushRequest>& requests);
  // The chief's optimizer state for the targets whose state it has not sent yet.
  void add_optimizer_state(nn::Optimizer& optimizer, const std::vector<nn::Variable*>& targets,
                           std::vector<PushRequest>& requests);
  // Sends the requests that carry anything (ps 0's always: it counts the global step), in
  // parts under the message limit (push_parts.h). With a staleness bound ps 0 judges first,
  // and the gradients of a dropped push go nowhere else. A push of a coordinator's unit
  // also goes to ps 0 first: the gradients of a step its ledger refuses go nowhere else.
  PushResponse send(std::vector<PushRequest> requests);

  const std::vector<std::unique_ptr<PsClient>>& clients_;
  const ParameterServerOptions& options_;
  WorkUnitSlot& work_unit_;
  InputReport& input_report_;
  bool chief_;
  uint64_t seed_;
  nn::VariableCreator base_;
  VariableSourceFn sources_;
  std::atomic<bool> restore_on_ps_{true};

  mutable Mutex mutex_;
  Placement placement_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, std::shared_future<std::shared_ptr<nn::Variable>>> creating_;  // same
  std::vector<std::string> order_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, Remote> remote_ CADRE_GUARDED_BY(mutex_);
  std::set<std::string> state_sent_;       // "<optimizer>/<variable>" (the chief's)
  std::set<std::string> iterations_sent_;  // "<optimizer>/<ps>" (the chief's)
  int64_t global_step_ CADRE_GUARDED_BY(mutex_) = 0;
  bool plan_logged_ = false;
};

}  // namespace cadre::ps
