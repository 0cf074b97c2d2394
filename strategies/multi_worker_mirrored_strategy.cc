#include "strategies/multi_worker_mirrored_strategy.h"

#include <glog/logging.h>

#include "core/autodiff/tape.h"
#include "core/base/strings.h"
#include "core/ops/array.h"

namespace cadre {

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(
    std::vector<Device> devices, std::unique_ptr<CoordinationService> service,
    std::unique_ptr<CoordinationClient> client, std::unique_ptr<ProcessCollective> collective)
    : Strategy(std::move(devices), hierarchical_copy_all_reduce()),
      service_(std::move(service)),
      client_(std::move(client)),
      collective_(std::move(collective)) {}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() {
  // The chief's service outlives the others' last calls: wait for them briefly.
  try {
    client_->barrier("shutdown", 30);
  } catch (const std::exception& e) {
    LOG(WARNING) << "shutdown barrier: " << e.what();
  }
  client_->stop_heartbeats();
  if (service_) service_->stop();
}

std::shared_ptr<MultiWorkerMirroredStrategy> MultiWorkerMirroredStrategy::create(
    const ClusterConfig& cluster, std::vector<Device> local_devices, MultiWorkerOptions options) {
  check_no_ps(cluster, "MultiWorkerMirroredStrategy");
  int rank = cluster.global_task_id();
  if (rank < 0) {
    throw InvalidArgumentError(str_cat("MultiWorkerMirroredStrategy: task ",
                                       cluster.task.to_string(),
                                       " does not train (only the chief and the workers do)"));
  }
  if (local_devices.empty()) local_devices = parse_devices("");
  std::vector<TaskId> tasks = cluster.training_tasks();
  std::string chief_address = cluster.address(cluster.chief());
  std::unique_ptr<CoordinationService> service;
  if (cluster.is_chief()) {
    service = CoordinationService::start(chief_address, tasks, options.coordination);
  }
  auto client = CoordinationClient::connect(chief_address, cluster.task, options.coordination);
  client->register_task(options.registration_timeout_seconds);
  std::string own = cluster.address(cluster.task);
  std::string host = own.substr(0, own.rfind(':'));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  auto collective = gloo_collective(*client, rank, static_cast<int>(tasks.size()), host,
                                    options.collective_timeout_seconds);
  LOG(INFO) << "MultiWorkerMirroredStrategy: worker " << rank << " of " << tasks.size() << " ("
            << cluster.task.to_string() << ") with " << local_devices.size()
            << " local replica(s); input shard " << rank << " of " << tasks.size();
  return std::shared_ptr<MultiWorkerMirroredStrategy>(new MultiWorkerMirroredStrategy(
      std::move(local_devices), std::move(service), std::move(client), std::move(collective)));
}

void MultiWorkerMirroredStrategy::cross_worker_sum(std::vector<Gradient>& values,
                                                   double& weight) const {
  if (std::string failure = client_->failure(); !failure.empty()) {
    throw AbortedError(str_cat("the cluster failed: ", failure));
  }
  NoGradScope no_grad;
  // One buffer of doubles for everything (dense; sparse gradients densified), the weight
  // last: one ring all-reduce per step.
  int64_t total = 1;
  std::vector<Tensor> dense(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined()) continue;
    dense[i] = contiguous(to_device(values[i].to_dense(), Device::cpu(0)).cast(DType::kFloat64));
    total += dense[i].numel();
  }
  std::vector<double> buffer(static_cast<size_t>(total));
  size_t at = 0;
  for (const Tensor& t : dense) {
    if (!t.defined()) continue;
    const double* src = t.data<double>();
    std::copy(src, src + t.numel(), buffer.begin() + static_cast<std::ptrdiff_t>(at));
    at += static_cast<size_t>(t.numel());
  }
  buffer[at] = weight;
  collective_->sum(buffer.data(), buffer.size());
  at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined()) continue;
    Tensor summed = Tensor::from_bytes(buffer.data() + at, dense[i].shape(), DType::kFloat64);
    values[i] = to_device(summed.cast(values[i].dtype()), values[i].device());
    at += static_cast<size_t>(dense[i].numel());
  }
  weight = buffer[at];
}

}  // namespace cadre
