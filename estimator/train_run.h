// The Run a training loop's hooks see (estimator/training.cc): the replicas' variables and
// generators, one step of model_fn on every replica, and the chief's checkpoints with every
// worker's input position.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/hooks.h"
#include "cadre/io/summary_writer.h"
#include "cadre/random/generator.h"
#include "cadre/strategies/distributed_dataset.h"
#include "cadre/strategies/strategy.h"
#include "estimator/given_batches.h"
#include "estimator/model_session.h"
#include "estimator/ps_input_positions.h"
#include "estimator/worker_parts.h"
#include "estimator/worker_states.h"

namespace cadre::estimator_internal {

class TrainRun : public Run {
 public:
  // Creates the variables through the strategy: restored from `resume` (verified whole when
  // it was chosen), else warm-started from `warm` under `warm_names`, else initialised.
  // `manager` (the chief's, else null) saves the checkpoints; `open_writer` (null: no
  // summaries) opens the event file when a hook first asks for it.
  TrainRun(const Estimator& estimator, std::shared_ptr<const Strategy> strategy, int64_t start_step,
           std::shared_ptr<const checkpoint::CheckpointReader> resume,
           std::shared_ptr<const checkpoint::CheckpointReader> warm,
           checkpoint::CheckpointSourceFn warm_names, checkpoint::CheckpointManager* manager,
           std::optional<int64_t> max_steps, std::function<io::SummaryWriter*()> open_writer);

  ModeKeys mode() const override { return ModeKeys::kTrain; }
  const RunConfig& config() const override { return estimator_.config(); }
  int64_t global_step() const override { return global_step_; }
  std::optional<int64_t> max_steps() const override { return max_steps_; }
  nn::VariableStore& store() override { return variables_->primary(); }
  // Opened when first asked for (the hooks ask after a step), so that a run refused at its
  // start (input that cannot be read, a batch too large) leaves no event file behind.
  io::SummaryWriter* summary_writer() override;
  void flush_summaries() {
    if (writer_) writer_->flush();
  }
  Generator& generator() { return generators_[0]; }

  std::string save_checkpoint() override;
  void wait_for_checkpoints() override {
    if (manager_) manager_->wait();
  }
  // The loop's input; `read_again` makes it anew as a restarted worker's (training_input).
  void set_iterator(DistributedIterator* iterator, std::function<void()> read_again) {
    iterator_ = iterator;
    read_again_ = std::move(read_again);
  }
  // Whether ps 0 keeps this worker's input position (parameter-server training,
  // ps_input_positions.h).
  bool positions_on_ps() const { return input_report_ != nullptr; }
  // Before the loop takes a batch: where ps 0 keeps the position and asked for it, the
  // position goes with the push of that batch. A worker of coordinator mode given its first
  // unit by a new client reads its input again first (follow_new_client).
  void before_batch();
  // Coordinator mode: whether this worker's last step was refused because a newer client
  // replaced the one that gave its unit. That step did not happen here (its batch is read
  // again from the new client's checkpoint), so no hook sees it.
  bool refused_for_new_client();
  // Once this worker's input has ended, where ps 0 keeps the position: tells ps 0, and on
  // the chief waits for the other workers' inputs to end (end_input_on_ps), taking the
  // global step then for the last checkpoint.
  void end_input_on_ps(std::optional<int64_t> max_steps, const std::function<bool()>& stop) {
    int64_t now =
        estimator_internal::end_input_on_ps(*strategy_, manager_ != nullptr, max_steps, stop);
    if (manager_) global_step_ = std::max(global_step_, now);
  }
  // RunConfig.deterministic: each step takes its gradients per input shard, this worker's
  // shards of `shards` starting at `first_shard`, and adds them along a tree over the shards
  // (shard_ordered_step.cc).
  // The input shards training_input() last read the input as (0: none).
  void set_input_shards(int64_t shards) { input_shards_ = shards; }
  int64_t input_shards() const { return input_shards_; }
  void reduce_in_shard_order(int64_t first_shard, int64_t shards) {
    ordered_first_shard_ = first_shard;
    ordered_shards_ = shards;
  }
  void announce_checkpoint() override;
  // After every step: the step signals any worker that steps with this one raised (this
  // worker's own, where none does). When the chief announced a checkpoint of this step, or
  // a worker a planned stop after it, every worker hands the chief its input position and
  // random streams.
  unsigned take_step_signals();

  // After this worker joined an elastic group's next generation: every member takes the
  // variables (slots included) and global step of the member that stepped furthest
  // (group_steps.cc). Collective.
  // A joiner (`joining`: restarted into the running group) is never the one taken.
  void adopt_most_advanced(bool joining);
  // Whether this worker counts the batches each worker gave: an elastic group's chief.
  bool counts_batches_given() const;
  // On an elastic group's chief: each of the workers `members` gave a batch to each of
  // `steps` more steps (GivenBatches).
  void count_batches_given(const std::vector<int>& members, int64_t steps) {
    if (manager_) given_.given(members, steps);
  }
  // On a joiner, once it took the members' state: the batches of its input the group took
  // before this worker came back (from its checkpoint's position), to skip.
  int64_t take_batches_to_skip() { return std::exchange(to_skip_, 0); }
  const Strategy& strategy() const { return *strategy_; }

  bool planned_stop() const override { return planned_stop_; }
  void begin_planned_stop() { planned_stop_ = true; }

  // One step on the replicas' inputs; returns its result (replica 0's spec stays alive in
  // *spec). The loss reported is the replicas' losses averaged by batch size, as the loss of
  // the global batch.
  StepResult step(const PerReplica<io::Element>& inputs, EstimatorSpec* spec);
  // Whether the last step had no examples on any worker stepping with this one (each
  // steps with no rows once its input has ended, until every worker's has): the input of
  // the job has ended, and that step did not count.
  bool every_input_ended() const { return every_input_ended_; }

 private:
  // After adopt_most_advanced, where `restored` names by rank the checkpoint each joiner
  // restored (-1: a member): the chief tells each joiner the batches it must skip.
  // Collective.
  void tell_joiners_what_to_skip(const std::vector<int64_t>& restored,
                                 const std::vector<int>& workers);
  // On an elastic group's chief: every other worker's position and generators in `resume`,
  // where its checkpoints keep them for a worker that leaves before they are first gathered.
  void keep_positions_of(const checkpoint::CheckpointReader& resume);
  // This worker's input position and its replicas' generators.
  WorkerState own_state();
  // Coordinator mode: a unit of a client newer than the one this worker's input follows. The
  // new client restored a checkpoint's variables, so the worker reads its input on from that
  // checkpoint's position, as it would restarted: what it read under the client before
  // counts for nothing now.
  void follow_new_client();
  // Whether the workers write parts of the checkpoints (WorkerParts), decided once model_fn
  // and the optimizer have made the variables and slots.
  void decide_worker_parts();
  // After a step whose checkpoint the chief announced, on every worker: its part of that
  // checkpoint, where the workers write one.
  void start_worker_parts();
  // variables_to_train, chosen again only when the store's trainable variables change (the
  // regular expression is not matched against every name at every step). Replicas call it
  // concurrently.
  std::vector<nn::Variable*> chosen_variables(const nn::VariableStore& store, const TrainOp& op);
  // model_fn's training step on one replica.
  ReplicaOutput replica_step(ReplicaContext& ctx, const io::Element& batch);
  // The same, one input shard's rows at a time, reduced in shard order.
  ReplicaOutput shard_ordered_step(ReplicaContext& ctx, const io::Element& batch);
  // Each scalar summary of replica 0's spec becomes the replicas' average by batch size.
  static void average_summaries(PerReplica<ReplicaOutput>& steps, int64_t global_batch,
                                EstimatorSpec* spec);

  const Estimator& estimator_;
  std::shared_ptr<const Strategy> strategy_;
  checkpoint::CheckpointManager* manager_;
  std::optional<int64_t> max_steps_;
  int64_t global_step_;
  std::vector<Generator> generators_;
  std::unique_ptr<DistributedVariables> variables_;
  std::function<io::SummaryWriter*()> open_writer_;  // null: this run writes no summaries
  io::SummaryWriter* writer_ = nullptr;              // the Estimator's, once opened
  DistributedIterator* iterator_ = nullptr;
  std::function<void()> read_again_;
  std::optional<int64_t> ordered_first_shard_;
  int64_t ordered_shards_ = 0;
  int64_t input_shards_ = 0;
  std::map<int, WorkerState> gathered_;  // the other workers', by index, on the chief
  int64_t gathered_step_ = -1;
  GivenBatches given_;                       // on an elastic group's chief
  ps::InputReport* input_report_ = nullptr;  // ps 0's, where it keeps the position
  // Coordinator mode's workers: the client generation whose checkpoint the input follows.
  std::optional<int64_t> client_generation_;
  // On such a chief: where the workers that have pushed nothing yet resume.
  std::shared_ptr<const checkpoint::CheckpointReader> resume_;
  const int64_t resumed_step_;
  int64_t to_skip_ = 0;
  bool planned_stop_ = false;
  bool every_input_ended_ = false;
  std::map<std::string, std::string> attributes_;  // of every checkpoint this run saves
  std::unique_ptr<WorkerParts> worker_parts_;
  bool worker_parts_decided_ = false;
  std::once_flag slots_made_;  // an elastic group's, before its first collective
  struct Chosen {
    size_t trainable = 0;
    std::vector<nn::Variable*> variables;
  };
  Mutex chosen_mutex_;
  std::map<std::pair<const nn::VariableStore*, std::string>, Chosen> chosen_
      CADRE_GUARDED_BY(chosen_mutex_);
};

}  // namespace cadre::estimator_internal
