#include "cadre/strategies/multi_worker_mirrored_strategy.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "strategies/cluster/worker_group.h"
#include "strategies/collectives/nccl/collective.h"
#include "strategies/gradient_buckets.h"
#include "strategies/sparse_rows.h"
#include "strategies/strategy_extended.h"

namespace cadre {

namespace {

constexpr size_t kLoggedVariableBytes = size_t{16} << 20;

// The chief's initial values, as local replica 0 received them, for the other local
// replicas of one create_variables call.
class InitialValues {
 public:
  void publish(const std::string& name, Tensor value) {
    MutexLock lock(mutex_);
    values_[name] = std::move(value);
    published_.notify_all();
  }
  Tensor wait(const std::string& name, double timeout_seconds) {
    MutexLock lock(mutex_);
    if (!published_.wait_for(mutex_, std::chrono::duration<double>(timeout_seconds),
                             [&]() CADRE_REQUIRES(mutex_) { return values_.count(name) > 0; })) {
      throw DeadlineExceededError(str_cat(
          "variable ", name, ": replica 0 did not create it within ", timeout_seconds, " s"));
    }
    return values_.at(name);
  }

 private:
  Mutex mutex_;
  CondVar published_;
  std::map<std::string, Tensor> values_ CADRE_GUARDED_BY(mutex_);
};

// Mirrored variables on every worker, kept identical by starting from the chief's values
// and reducing every gradient across the workers.
class MultiWorkerMirroredExtended final : public StrategyExtended {
 public:
  MultiWorkerMirroredExtended(std::vector<Device> devices, std::unique_ptr<WorkerGroup> group,
                              std::unique_ptr<GpuCollective> gpus,
                              const MultiWorkerOptions& options)
      : StrategyExtended(std::move(devices), hierarchical_copy_all_reduce()),
        group_(std::move(group)),
        gpus_(std::move(gpus)),
        timeout_seconds_(options.collective_timeout_seconds),
        sharded_checkpoint_min_bytes_(options.sharded_checkpoint_min_bytes) {
    // Buckets need one replica (the tape's hook runs on its thread); else one buffer after
    // the backward pass (cross_worker_sum).
    if (num_local_replicas() == 1) {
      BucketOptions buckets;
      buckets.bucket_bytes = options.bucket_bytes;
      buckets.first_bucket_bytes = options.first_bucket_bytes;
      // Between processes of one host the reduction is memory traffic on the cores that run
      // the backward pass: there is nothing to overlap it with. Across hosts it waits on
      // the network; NCCL's sums run on the GPU beside the backward kernels.
      const bool one_host =
          !gpus_ && std::string(group_->collective->transport()) == "shared memory";
      buckets.overlap = options.overlap_gradients && !one_host;
      // Pieces whether or not they overlap, so that overlap_gradients = false sums the same
      // buckets; on one host nothing overlaps, and whole kernels are built faster.
      buckets.piece_bytes = one_host ? 0 : options.piece_bytes;
      buckets_ = gpus_ ? std::make_unique<GradientBuckets>(*gpus_, *group_->collective, buckets)
                       : std::make_unique<GradientBuckets>(*group_->collective, buckets);
    }
  }

  Device variable_device(int replica) const override { return devices()[replica]; }
  bool mirrors_variables() const override { return true; }
  int num_workers() const override { return group_->collective->size(); }
  int worker_index() const override { return group_->collective->rank(); }
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
    // when a collective failed, whose error is a peer's failure, not this worker's.
    if (!group_->collective_failed.load(std::memory_order_relaxed)) {
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
    bool sharded = num_workers() > 1 && sharded_checkpoint_min_bytes_ >= 0 &&
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
  std::unique_ptr<GradientBuckets> buckets_;  // when gradients overlap the backward pass
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
};

std::vector<nn::VariableCreator> MultiWorkerMirroredExtended::copy_creators(
    nn::VariableCreator creator, int copies) const {
  auto initial = std::make_shared<InitialValues>();
  std::vector<nn::VariableCreator> creators;
  const bool others = copies > 1;
  creators.push_back([this, creator, initial, others](const nn::VariableSpec& spec, uint64_t seed) {
    auto started = std::chrono::steady_clock::now();
    std::shared_ptr<nn::Variable> variable = creator(spec, seed);
    auto made = std::chrono::steady_clock::now();
    NoGradScope no_grad;
    Tensor host = contiguous(to_device(variable->tensor(), Device::cpu(0)));
    // A variable in host memory receives the chief's value in place, unless other local
    // replicas take that value later (a copy kept for them would be a second model).
    bool in_place = host.shares_buffer_with(variable->tensor());
    if (in_place && others) {
      host = host.clone();
      in_place = false;
    }
    group_->collective->broadcast(host.raw_data(), host.nbytes(), /*root=*/0);
    if (!in_place) variable->assign(host);
    if (others) initial->publish(spec.name, host);
    // What a large model's start costs (initialized or restored, then the chief's sent).
    if (host.nbytes() >= kLoggedVariableBytes) {
      auto seconds = [](auto from, auto to) {
        return std::chrono::duration<double>(to - from).count();
      };
      LOG(INFO) << "variable " << spec.name << " (" << host.nbytes() << " bytes): made in "
                << seconds(started, made) << " s, the chief's value received in "
                << seconds(made, std::chrono::steady_clock::now()) << " s";
    }
    return variable;
  });
  for (int r = 1; r < copies; ++r) {
    creators.push_back([this, creator, initial](const nn::VariableSpec& spec, uint64_t seed) {
      std::shared_ptr<nn::Variable> variable = creator(spec, seed);
      variable->assign(initial->wait(spec.name, timeout_seconds_));
      return variable;
    });
  }
  return creators;
}

void MultiWorkerMirroredExtended::cross_worker_sum(std::vector<Gradient>& values,
                                                   double& weight) const {
  if (std::string failure = group_->client->failure(); !failure.empty()) {
    throw AbortedError(str_cat("the cluster failed: ", failure));
  }
  NoGradScope no_grad;
  // One flat buffer for the dense gradients (sparse ones are gathered as rows), then the
  // weight and the step signal: one all-reduce per step, by NCCL on the GPU that holds the
  // worker's sum, else through host memory (shared memory or Gloo's ring). Float32 gradients travel
  // as float32 (half the bytes of doubles), anything else as float64. The sums are views of
  // the buffer: no copies out.
  ProcessCollective& across = gpus_ ? static_cast<ProcessCollective&>(*gpus_) : *group_->collective;
  const Device home = across.device();
  bool all_float = true;
  int64_t total = 2;
  std::vector<Tensor> dense(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined() || values[i].is_sparse()) continue;  // rows go by all-gather
    dense[i] = to_device(values[i].to_dense(), home);
    all_float &= dense[i].dtype() == DType::kFloat32;
    total += dense[i].numel();
  }
  DType dtype = all_float ? DType::kFloat32 : DType::kFloat64;
  Tensor flat = Tensor::empty(Shape{total}, dtype, home);
  int64_t at = 0;
  for (const Tensor& t : dense) {
    if (!t.defined()) continue;
    flat.slice(0, at, at + t.numel()).reshape(t.shape().to_vector()).assign(t);
    at += t.numel();
  }
  flat.slice(0, at, at + 2)
      .assign(Tensor::from_vector<double>({weight, encode_step_signals(signals_to_send())})
                  .cast(dtype));
  if (all_float) {
    across.sum(flat.data<float>(), static_cast<size_t>(total));
  } else {
    across.sum(flat.data<double>(), static_cast<size_t>(total));
  }
  at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined()) continue;
    if (values[i].is_sparse()) {
      values[i] = all_gather_rows(*this, values[i].sparse());
      continue;
    }
    Tensor summed = flat.slice(0, at, at + dense[i].numel()).reshape(dense[i].shape().to_vector());
    if (summed.dtype() != values[i].dtype()) summed = summed.cast(values[i].dtype());
    values[i] = to_device(summed, values[i].device());
    at += dense[i].numel();
  }
  weight = flat.slice(0, at, at + 1).item<double>();
  signal_heard_ |= decode_step_signals(flat.slice(0, at + 1, at + 2).item<double>());
  ++reductions_;
}

void MultiWorkerMirroredExtended::begin_gradients(const std::vector<Tensor>& sources, double weight,
                                                  const std::vector<double>& scalars) const {
  if (std::string failure = group_->client->failure(); !failure.empty()) {
    throw AbortedError(str_cat("the cluster failed: ", failure));
  }
  // The weight, the step signal and the scalars ride in the last bucket.
  std::vector<double> extras{weight, encode_step_signals(signals_to_send())};
  extras.insert(extras.end(), scalars.begin(), scalars.end());
  // Which gradients were sparse last step (the same on every worker: one model): they go
  // as rows. The first step sums every gradient dense.
  if (sparse_.size() != sources.size()) sparse_.assign(sources.size(), false);
  step_sparse_ = sparse_;
  buckets_->begin(sources, std::move(extras), step_sparse_, weight);
}

std::vector<Gradient> MultiWorkerMirroredExtended::finish_gradients(
    double& weight, std::vector<double>& scalars) const {
  std::vector<double> extras;
  std::vector<Gradient> sums = buckets_->finish(extras);
  for (size_t i = 0; i < sums.size(); ++i) {
    if (step_sparse_[i]) sums[i] = Gradient(rows_across_workers(sums[i], i));
  }
  weight = extras[0];
  signal_heard_ |= decode_step_signals(extras[1]);
  scalars.assign(extras.begin() + 2, extras.end());
  ++reductions_;
  return sums;
}

IndexedSlices MultiWorkerMirroredExtended::rows_across_workers(const Gradient& mine,
                                                               size_t source) const {
  if (mine.defined()) return all_gather_rows(*this, mine.sparse());
  // No rows here this step; the others may have some.
  const Shape& shape = sparse_shapes_.at(source);
  std::vector<int64_t> row = shape.to_vector();
  row[0] = 0;
  return all_gather_rows(*this, IndexedSlices{Tensor::empty(Shape{0}, DType::kInt64),
                                              Tensor::empty(Shape(row)), shape});
}

unsigned MultiWorkerMirroredExtended::take_step_signal() const {
  unsigned raised = signals_to_send();
  signal_raised_ = 0;
  if (reductions_.exchange(0) == 0) {
    // No reduction carried them this step (nothing to train): one of their own, which every
    // worker makes alike.
    double value = encode_step_signals(raised);
    group_->collective->sum(&value, 1);
    return decode_step_signals(value);
  }
  return signal_heard_.exchange(0);
}

std::vector<std::string> MultiWorkerMirroredExtended::all_gather_bytes(std::string bytes) const {
  ProcessCollective& collective = *group_->collective;
  std::vector<std::string> all(static_cast<size_t>(collective.size()));
  for (int r = 0; r < collective.size(); ++r) {
    uint64_t size = r == collective.rank() ? bytes.size() : 0;
    collective.broadcast(&size, sizeof size, r);
    all[r] = r == collective.rank() ? std::move(bytes) : std::string(size, '\0');
    if (size > 0) collective.broadcast(all[r].data(), size, r);
  }
  return all;
}

}  // namespace

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(std::unique_ptr<StrategyExtended> extended)
    : Strategy(std::move(extended)) {}

std::shared_ptr<MultiWorkerMirroredStrategy> MultiWorkerMirroredStrategy::create(
    const ClusterConfig& cluster, std::vector<Device> local_devices, MultiWorkerOptions options,
    Communication communication) {
  check_no_ps(cluster, "MultiWorkerMirroredStrategy");
  if (local_devices.empty()) local_devices = parse_devices("");
  for (const Device& d : local_devices) check_device(d);  // before joining anyone
  if (cluster.task.type == "evaluator") {
    // The evaluator is outside the training collective, as in TensorFlow: it evaluates on
    // its own devices, so that one program's strategy serves every role.
    LOG(INFO) << "MultiWorkerMirroredStrategy on " << cluster.task.to_string()
              << ": outside the training collective, on " << join(local_devices);
    return std::shared_ptr<MultiWorkerMirroredStrategy>(
        new MultiWorkerMirroredStrategy(local_mirrored_extended(std::move(local_devices))));
  }
  bool all_gpus = std::all_of(local_devices.begin(), local_devices.end(),
                              [](const Device& d) { return d.is_gpu(); });
  if (communication == Communication::kNccl && !all_gpus) {
    throw InvalidArgumentError(
        str_cat("MultiWorkerMirroredStrategy: NCCL communication needs GPU "
                "devices, got ",
                join(local_devices), "; use Communication::kRing (Gloo) for CPU devices"));
  }
  bool nccl = communication == Communication::kNccl ||
              (communication == Communication::kAuto && all_gpus && nccl_available());
  if (nccl && !nccl_available()) {
    throw UnimplementedError(
        "MultiWorkerMirroredStrategy: Communication::kNccl needs a build with CUDA and NCCL; "
        "Communication::kRing reduces GPU gradients through host memory");
  }
  std::unique_ptr<WorkerGroup> group = join_worker_group(cluster, options);
  int rank = group->collective->rank(), size = group->collective->size();
  std::unique_ptr<GpuCollective> gpus;
  if (nccl) {
    // One rank per worker, on its first GPU: gradients are summed within the worker first
    // (onto that GPU), then across workers, as TensorFlow's hierarchical all-reduce does.
    NcclOptions nccl_options;
    nccl_options.timeout_seconds = options.collective_timeout_seconds;
    CoordinationClient* client = group->client.get();
    nccl_options.peer_failure = [client] { return client->failure(); };
    gpus = nccl_collective(*client, rank, size, local_devices[0], std::move(nccl_options));
  }
  LOG(INFO) << "MultiWorkerMirroredStrategy: worker " << rank << " of " << size << " ("
            << cluster.task.to_string() << ") with " << local_devices.size()
            << " local replica(s); gradients across workers by "
            << (gpus ? gpus->transport() : group->collective->transport());
  return std::shared_ptr<MultiWorkerMirroredStrategy>(
      new MultiWorkerMirroredStrategy(std::make_unique<MultiWorkerMirroredExtended>(
          std::move(local_devices), std::move(group), std::move(gpus), options)));
}

}  // namespace cadre
