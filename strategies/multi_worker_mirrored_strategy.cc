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
#include "strategies/multi_worker_extended.h"

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

}  // namespace

MultiWorkerMirroredExtended::MultiWorkerMirroredExtended(std::vector<Device> devices,
                                                         std::unique_ptr<WorkerGroup> group,
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
    const bool one_host = !gpus_ && std::string(group_->collective->transport()) == "shared memory";
    buckets.overlap = options.overlap_gradients && !one_host;
    // Pieces whether or not they overlap, so that overlap_gradients = false sums the same
    // buckets; on one host nothing overlaps, and whole kernels are built faster.
    buckets.piece_bytes = one_host ? 0 : options.piece_bytes;
    bucket_options_ = buckets;
    buckets_ = gpus_ ? std::make_unique<GradientBuckets>(*gpus_, *group_->collective, buckets)
                     : std::make_unique<GradientBuckets>(*group_->collective, buckets);
  }
}

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
  if (options.coordination.elastic && cluster.has_job("client")) {
    throw InvalidArgumentError(
        "MultiWorkerMirroredStrategy: an elastic group is not for coordinator mode (a client "
        "drives the workers and keeps their progress itself)");
  }
  if (options.coordination.elastic && (nccl || local_devices.size() > 1)) {
    throw InvalidArgumentError(str_cat(
        "MultiWorkerMirroredStrategy: an elastic group needs one CPU replica per worker (its "
        "collectives are re-formed in host memory); got ",
        join(local_devices), nccl ? " with NCCL" : ""));
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
