// MultiWorkerMirroredStrategy's StrategyExtended: its creation, variables and start
// (multi_worker_mirrored_strategy.cc) and its collectives across the workers
// (multi_worker_collectives.cc).
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cadre/strategies/multi_worker_options.h"
#include "strategies/cluster/elastic_group.h"
#include "strategies/cluster/worker_group.h"
#include "strategies/collectives/nccl/collective.h"
#include "strategies/gradient_buckets.h"
#include "strategies/strategy_extended.h"

namespace cadre {

// Mirrored variables on every worker, kept identical by starting from the chief's values
// and reducing every gradient across the workers.
class MultiWorkerMirroredExtended final : public StrategyExtended {
 public:
  MultiWorkerMirroredExtended(std::vector<Device> devices, std::unique_ptr<WorkerGroup> group,
                              std::unique_ptr<GpuCollective> gpus,
                              const MultiWorkerOptions& options);

  Device variable_device(int replica) const override { return devices()[replica]; }
  bool mirrors_variables() const override { return true; }
  // An elastic group's workers are its tasks, present or not; its ranks, the members'.
  int num_workers() const override {
    return group_->elastic ? static_cast<int>(group_->elastic->tasks.size())
                           : group_->collective->size();
  }
  int worker_index() const override {
    return group_->elastic ? worker_of(group_->task) : group_->collective->rank();
  }
  bool elastic() const override { return group_->elastic != nullptr; }
  bool group_changed() const override {
    return group_->elastic && !group_->elastic->late &&
           group_->client->view_generation() > group_->elastic->generation;
  }
  bool rejoin(bool after_failure) const override;
  bool joining_late() const override { return group_->elastic && group_->elastic->late; }
  std::vector<int> workers_by_rank() const override;
  void broadcast_bytes(void* data, size_t bytes, int root) const override {
    group_->collective->broadcast(data, bytes, root);
  }
  void cross_worker_sum(std::vector<Gradient>& values, double& weight) const override;
  std::vector<std::string> all_gather_bytes(std::string bytes) const override;
  unsigned take_step_signal() const override;
  bool overlaps_gradients() const override { return buckets_ != nullptr; }
  void begin_gradients(const std::vector<Tensor>& sources, double weight,
                       const std::vector<double>& scalars) const override;
  void gradient_ready(size_t source, const Gradient& gradient) const override {
    if (gradient.is_sparse() && !sparse_[source]) {
      sparse_[source] = true;  // from the next step on
      LOG(INFO) << "the gradient of source " << source << " (" << gradient.shape()
                << ") is sparse: it is gathered across workers as rows";
      if (sparse_shapes_.size() <= source) sparse_shapes_.resize(source + 1);
      sparse_shapes_[source] = gradient.shape();
    }
    buckets_->ready(source, gradient);
  }
  std::vector<Gradient> finish_gradients(double& weight,
                                         std::vector<double>& scalars) const override;
  void leave_after_error(const std::string& error) const override {
    LOG(WARNING) << "training failed: leaving the worker group";
    // Reported first, so that the others learn what it was as their collectives break; not
    // when a collective failed, whose error is a peer's failure, not this worker's; nor by a
    // worker of an elastic group, which the others go on without (the service's host, whose
    // end is the group's, reports).
    const bool group_goes_on = group_->elastic && !group_->service;
    if (!group_->collective_failed.load(std::memory_order_relaxed) && !group_goes_on) {
      group_->client->report_error(error, /*timeout_seconds=*/2);
    }
    if (gpus_) gpus_->abort("this worker left after an error");
    group_->collective->leave();
  }
  void leave_after_planned_stop(double timeout_seconds) const override {
    try {
      group_->client->barrier(kPlannedStopBarrier, timeout_seconds);
    } catch (const std::exception& e) {
      LOG(WARNING) << "a planned stop: " << e.what();
    }
  }
  int64_t broadcast_from_chief(int64_t value) const override {
    group_->collective->broadcast(&value, sizeof value, /*root=*/0);
    return value;
  }
  int worker_checkpoint_parts(int64_t bytes) const override {
    // An elastic group's members change: the chief saves the variables whole.
    bool sharded = !group_->elastic && num_workers() > 1 && sharded_checkpoint_min_bytes_ >= 0 &&
                   bytes >= sharded_checkpoint_min_bytes_;
    return sharded ? num_workers() : 0;
  }
  Store* part_store() const override { return group_->client.get(); }
  std::string reduction() const override {
    std::string across = str_cat(gpus_ ? "NCCL" : group_->collective->transport(),
                                 " all-reduce across ", num_workers(), " workers");
    if (num_local_replicas() == 1) return across;
    return str_cat(StrategyExtended::reduction(), " within the worker, then ", across);
  }

 protected:
  // Every variable starts as the chief's (TensorFlow's MultiWorkerMirrored initializes by
  // broadcast): local replica 0 makes it and replaces its value by the chief's in a
  // broadcast (all workers create variables in the same order, as they run the same
  // model_fn); the other local replicas take replica 0's value.
  std::vector<nn::VariableCreator> copy_creators(nn::VariableCreator creator,
                                                 int copies) const override;

 private:
  std::unique_ptr<WorkerGroup> group_;
  std::unique_ptr<GpuCollective> gpus_;  // NCCL across workers, else the host collective
  double timeout_seconds_;
  int64_t sharded_checkpoint_min_bytes_;
  int worker_of(const std::string& task) const {
    const std::vector<std::string>& tasks = group_->elastic->tasks;
    return static_cast<int>(std::find(tasks.begin(), tasks.end(), task) - tasks.begin());
  }
  // When gradients overlap the backward pass; made again for each generation of an elastic
  // group (a step that failed may leave buckets half summed).
  mutable std::unique_ptr<GradientBuckets> buckets_;
  BucketOptions bucket_options_;
  // Per source of the bucketed step, whether its gradient is sparse (learnt from the last
  // step's own gradients), and the sparse ones' dense shapes.
  mutable std::vector<bool> sparse_;
  mutable std::vector<bool> step_sparse_;  // sparse_ as this step's buckets were laid out
  mutable std::vector<Shape> sparse_shapes_;
  IndexedSlices rows_across_workers(const Gradient& mine, size_t source) const;
  // The signals this worker raised for the coming step, and kStop once the coordination
  // service asked for a planned stop (a coordinator-mode client's notice).
  unsigned signals_to_send() const {
    unsigned raised = signal_raised_;
    if (group_->client->planned_stop_requested()) raised |= kStop;
    return raised;
  }
  // The step signal as the reductions since the last take_step_signal() carried it.
  mutable std::atomic<unsigned> signal_heard_{0};
  mutable std::atomic<int64_t> reductions_{0};
  mutable std::atomic<bool> stepped_{false};  // this worker took a step with the group
};

}  // namespace cadre
