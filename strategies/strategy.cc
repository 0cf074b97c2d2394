#include "cadre/strategies/strategy.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/cross_replica.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "core/tensor/transfer.h"
#include "io/auto_shard.h"
#include "strategies/replica_group.h"

namespace cadre {

// ---------------------------------------------------------------- DistributedVariables

DistributedVariables::DistributedVariables(std::vector<std::unique_ptr<nn::VariableStore>> stores,
                                           int replicas)
    : stores_(std::move(stores)), replicas_(replicas) {}

nn::VariableStore& DistributedVariables::store(int replica) {
  return stores_.size() == 1 ? *stores_[0] : *stores_.at(replica);
}

// ---------------------------------------------------------------- ReplicaContext

ReplicaContext::ReplicaContext(const Strategy& strategy, ReplicaGroup& group,
                               DistributedVariables& variables, int replica_id)
    : strategy_(strategy), group_(group), variables_(variables), replica_id_(replica_id) {}

int ReplicaContext::num_replicas_in_sync() const { return strategy_.num_replicas_in_sync(); }
Device ReplicaContext::device() const { return strategy_.devices()[replica_id_]; }

std::vector<Tensor> ReplicaContext::trainable_sources() {
  std::vector<Tensor> sources;
  for (nn::Variable* v : trainable_variables()) sources.push_back(v->tensor());
  return sources;
}

std::vector<Gradient> ReplicaContext::all_reduce(ReduceOp op, std::vector<Gradient> values,
                                                 double weight) {
  const bool across_workers = strategy_.num_workers_in_sync() > 1;
  if (group_.size() == 1 && !across_workers) {
    if (op == ReduceOp::kSum && weight != 1) {
      NoGradScope no_grad;
      for (Gradient& g : values) {
        if (!g.defined()) continue;
        if (g.is_sparse()) {
          IndexedSlices s = g.sparse();
          s.values = s.values * weight;
          g = s;
        } else {
          g = g.dense() * weight;
        }
      }
    }
    return values;
  }
  group_.inputs[replica_id_] = std::move(values);
  group_.weights[replica_id_] = weight;
  group_.arrive_and_wait([&] {
    std::vector<Device> destinations;
    for (int r = 0; r < group_.size(); ++r) destinations.push_back(strategy_.variable_device(r));
    if (!across_workers) {
      group_.outputs = strategy_.cross_device_ops().batch_reduce(op, group_.inputs, group_.weights,
                                                                 destinations);
      return;
    }
    // Within the worker first (the weighted sum on replica 0's device), then across workers,
    // then the mean over every example of the job.
    std::vector<Device> here(destinations.size(), destinations[0]);
    std::vector<Gradient> sum = strategy_.cross_device_ops().batch_reduce(
        ReduceOp::kSum, group_.inputs, group_.weights, here)[0];
    double total = 0;
    for (double w : group_.weights) total += w;
    strategy_.cross_worker_sum(sum, total);
    NoGradScope no_grad;
    for (int r = 0; r < group_.size(); ++r) {
      std::vector<Gradient> mine;
      for (const Gradient& g : sum) {
        if (!g.defined()) {
          mine.emplace_back();
          continue;
        }
        Tensor t = to_device(g.to_dense(), destinations[r]);
        mine.emplace_back(op == ReduceOp::kMean ? t * (1.0 / total) : t);
      }
      group_.outputs[r] = std::move(mine);
    }
  });
  return group_.outputs[replica_id_];
}

Tensor ReplicaContext::all_reduce(ReduceOp op, const Tensor& value, double weight) {
  return all_reduce(op, std::vector<Gradient>{value}, weight)[0].dense();
}

void ReplicaContext::barrier() {
  if (group_.size() > 1) group_.arrive_and_wait([] {});
}

void ReplicaContext::apply_gradients(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                                     double weight, std::vector<nn::Variable*> variables) {
  if (variables.empty()) variables = trainable_variables();
  std::vector<Gradient> reduced = all_reduce(ReduceOp::kMean, std::move(gradients), weight);
  if (variables_.mirrored()) {
    // Identical gradients and identical copies: every replica makes the same update.
    optimizer.apply_gradients(std::move(reduced), variables);
    return;
  }
  // One shared copy: replica 0 updates it while the others wait, so that none reads it
  // half-updated in the next step.
  barrier();
  if (replica_id_ == 0)
    strategy_.update_shared(variables_, optimizer, std::move(reduced), variables);
  barrier();
}

// ---------------------------------------------------------------- DistributedIterator

DistributedIterator::DistributedIterator(io::Iterator iterator, std::vector<Device> devices,
                                         bool split_batches, BatchSplit split)
    : iterator_(std::move(iterator)),
      devices_(std::move(devices)),
      split_(split_batches),
      batch_split_(split) {}

namespace {

// `value` on `device`. A GPU gets it through pinned host memory on its copy stream, which
// its kernels wait for on the device (the host does not); `transfers` keeps the copies
// alive until the iterator's next step.
Tensor stage(const Tensor& value, Device device, std::vector<Transfer>& transfers) {
  if (!device.is_gpu() || !value.device().is_cpu()) return to_device(value, device);
  Tensor pinned = empty_pinned(value.shape(), value.dtype());
  pinned.assign(value);
  AsyncCopy copy = to_device_async(pinned, device);
  transfers.push_back(copy.transfer);
  return copy.tensor;
}

// Rows [begin, end) of every feature and of the labels, on `device`.
io::Element rows_of(const io::Element& element, int64_t begin, int64_t end, Device device,
                    std::vector<Transfer>& transfers) {
  io::Element part;
  for (const auto& [name, value] : element.features) {
    part.features.set(name, stage(value.slice(0, begin, end), device, transfers));
  }
  if (element.labels.defined()) {
    part.labels = stage(element.labels.slice(0, begin, end), device, transfers);
  }
  return part;
}

io::Element on_device(io::Element element, Device device, std::vector<Transfer>& transfers) {
  io::Element moved;
  for (const auto& [name, value] : element.features) {
    moved.features.set(name, stage(value, device, transfers));
  }
  if (element.labels.defined()) moved.labels = stage(element.labels, device, transfers);
  return moved;
}

int64_t rows_in(const io::Element& element) {
  if (element.labels.defined() && element.labels.rank() > 0) return element.labels.dim(0);
  for (const auto& [name, value] : element.features) {
    if (value.rank() > 0) return value.dim(0);
  }
  throw InvalidArgumentError(
      "distribute_dataset: elements must be batches (a first dimension "
      "to split over the replicas); add .batch(global_batch_size)");
}

}  // namespace

std::optional<PerReplica<io::Element>> DistributedIterator::next() {
  transfers_.clear();  // the previous step's copies: done, or waited for here
  NoGradScope no_grad;
  const int replicas = static_cast<int>(devices_.size());
  PerReplica<io::Element> out;
  if (!split_) {
    for (int r = 0; r < replicas; ++r) {
      std::optional<io::Element> element = iterator_.next();
      if (!element) break;
      out.push_back(on_device(std::move(*element), devices_[r], transfers_));
    }
    if (out.empty()) return std::nullopt;
    return out;
  }
  std::optional<io::Element> batch = iterator_.next();
  if (!batch) return std::nullopt;
  int64_t rows = rows_in(*batch);
  const int total = batch_split_.total;
  if (rows < total) {
    throw InvalidArgumentError(str_cat(
        "distribute_dataset: a batch of ", rows, " examples cannot feed ", total,
        " replicas; use a global batch of at least ", total, " (or drop_remainder in batch)"));
  }
  int64_t base = rows / total, extra = rows % total;
  auto start_of = [&](int64_t g) { return g * base + std::min<int64_t>(g, extra); };
  for (int r = 0; r < replicas; ++r) {
    int64_t g = batch_split_.first + r;
    out.push_back(rows_of(*batch, start_of(g), start_of(g + 1), devices_[r], transfers_));
  }
  return out;
}

DistributedIterator DistributedDataset::make_iterator() const {
  return DistributedIterator(dataset_.make_iterator(), devices_, split_, batch_split_);
}

// ---------------------------------------------------------------- Strategy

Strategy::Strategy(std::vector<Device> devices, std::shared_ptr<CrossDeviceOps> cross_device_ops)
    : devices_(std::move(devices)), cross_device_ops_(std::move(cross_device_ops)) {
  if (devices_.empty()) {
    throw InvalidArgumentError(
        str_cat("a strategy needs at least one device; available: ", join(available_devices())));
  }
  std::set<std::string> seen;
  for (const Device& d : devices_) {
    check_device(d);
    if (!seen.insert(d.to_string()).second) {
      throw InvalidArgumentError(
          str_cat("device ", d, " is named twice in the strategy's devices (", join(devices_),
                  "); available: ", join(available_devices())));
    }
  }
  if (!cross_device_ops_) cross_device_ops_ = hierarchical_copy_all_reduce();
}

Strategy::~Strategy() = default;

std::string Strategy::topology() const {
  return str_cat(devices_.size(), devices_.size() == 1 ? " replica on " : " replicas on ",
                 join(devices_));
}

void Strategy::update_shared(DistributedVariables&, nn::Optimizer& optimizer,
                             std::vector<Gradient> gradients,
                             const std::vector<nn::Variable*>& targets) const {
  optimizer.apply_gradients(std::move(gradients), targets);
}

std::shared_ptr<const nn::VariableStore> Strategy::variables_to_save(
    DistributedVariables& variables) const {
  return std::shared_ptr<const nn::VariableStore>(std::shared_ptr<void>(), &variables.primary());
}

std::unique_ptr<DistributedVariables> Strategy::create_variables(
    uint64_t seed, nn::VariableCreator creator) const {
  std::vector<std::unique_ptr<nn::VariableStore>> stores;
  int copies = mirrors_variables() ? num_local_replicas() : 1;
  std::vector<nn::VariableCreator> creators = copy_creators(std::move(creator), copies);
  for (int r = 0; r < copies; ++r) {
    Device device = variable_device(r);
    stores.push_back(std::make_unique<nn::VariableStore>(
        seed, [device, creator = creators[r]](const nn::VariableSpec& spec, uint64_t s) {
          DeviceScope scope(device);
          return creator(spec, s);
        }));
  }
  return std::make_unique<DistributedVariables>(std::move(stores), num_local_replicas());
}

namespace {

// Layers reach the other replicas (sync_batch_norm) through the replica's context.
class ContextCollective : public nn::ReplicaCollective {
 public:
  ContextCollective(ReplicaContext& context, bool mirrored)
      : context_(context), mirrored_(mirrored) {}
  int num_replicas() const override { return context_.num_replicas_in_sync(); }
  bool updates_variables() const override { return mirrored_ || context_.replica_id() == 0; }
  Tensor sum(const Tensor& x) override {
    return to_device(context_.all_reduce(ReduceOp::kSum, x), context_.device());
  }

 private:
  ReplicaContext& context_;
  bool mirrored_;
};

}  // namespace

void Strategy::run_replicas(DistributedVariables& variables,
                            const std::function<void(ReplicaContext&)>& fn,
                            std::vector<Generator>* generators) const {
  const int replicas = num_local_replicas();
  if (generators && static_cast<int>(generators->size()) != replicas) {
    throw InvalidArgumentError(
        str_cat("run: ", generators->size(), " generators for ", replicas, " replicas"));
  }
  before_run(variables);
  ReplicaGroup group(replicas);
  auto body = [&](int r) {
    DeviceScope device_scope(devices_[r]);
    ReplicaThreadScope threads(replicas);
    nn::VariableStoreScope store_scope(variables.store(r));
    std::optional<GeneratorScope> generator_scope;
    if (generators) generator_scope.emplace((*generators)[r]);
    ReplicaContext context(*this, group, variables, r);
    ContextCollective collective(context, variables.mirrored());
    nn::ReplicaCollectiveScope collective_scope(&collective);
    try {
      fn(context);
    } catch (...) {
      group.abort();
      throw;
    }
  };
  std::vector<std::exception_ptr> errors;
  if (replicas == 1) {
    errors.resize(1);
    try {
      body(0);
    } catch (...) {
      errors[0] = std::current_exception();
    }
  } else {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    if (!threads_) threads_ = std::make_unique<ReplicaThreads>(replicas);
    errors = threads_->run(body);
  }
  // The replica that failed first, not the ones released with AbortedError because of it.
  std::exception_ptr first;
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const AbortedError&) {
      if (!first) first = e;
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

Tensor Strategy::reduce(ReduceOp op, const PerReplica<Tensor>& values,
                        const std::vector<double>& weights) const {
  if (values.size() != devices_.size()) {
    throw InvalidArgumentError(
        str_cat("reduce: ", values.size(), " values for ", devices_.size(), " replicas"));
  }
  if (!weights.empty() && weights.size() != values.size()) {
    throw InvalidArgumentError(
        str_cat("reduce: ", weights.size(), " weights for ", values.size(), " values"));
  }
  for (size_t r = 1; r < values.size(); ++r) {
    if (values[r].shape() != values[0].shape() || values[r].dtype() != values[0].dtype()) {
      throw InvalidArgumentError(str_cat("reduce: replica ", r, "'s value is ",
                                         dtype_name(values[r].dtype()), " ", values[r].shape(),
                                         ", replica 0's ", dtype_name(values[0].dtype()), " ",
                                         values[0].shape()));
    }
  }
  PerReplica<std::vector<Gradient>> lists;
  for (const Tensor& v : values) lists.push_back({v});
  std::vector<double> w = weights.empty() ? std::vector<double>(values.size(), 1.0) : weights;
  std::vector<Device> destinations(values.size(), devices_[0]);
  return cross_device_ops_->batch_reduce(op, lists, w, destinations)[0][0].dense();
}

Tensor Strategy::gather(const PerReplica<Tensor>& values, int axis) const {
  if (values.size() != devices_.size()) {
    throw InvalidArgumentError(
        str_cat("gather: ", values.size(), " values for ", devices_.size(), " replicas"));
  }
  NoGradScope no_grad;
  std::vector<Tensor> here;
  for (const Tensor& v : values) here.push_back(to_device(v, devices_[0]));
  return concat(here, axis);
}

io::InputContext Strategy::input_context() const {
  io::InputContext context;
  context.num_input_pipelines = num_workers();
  context.input_pipeline_id = worker_index();
  context.num_replicas_in_sync = num_replicas_in_sync();
  return context;
}

DistributedDataset Strategy::distribute_dataset(const io::Dataset& dataset) const {
  if (num_workers_in_sync() == num_workers()) {
    BatchSplit split{worker_index() * num_local_replicas(), num_replicas_in_sync()};
    return DistributedDataset(dataset, devices_, /*split_batches=*/true, split);
  }
  // Workers that step on their own each take their own batches.
  io::ShardedDataset sharded = io::auto_shard(dataset, num_workers(), worker_index());
  LOG(INFO) << "input of worker " << worker_index() << " of " << num_workers() << ": "
            << sharded.plan;
  return DistributedDataset(sharded.dataset, devices_, /*split_batches=*/true);
}

DistributedDataset Strategy::distribute_datasets_from_function(const InputFn& input_fn) const {
  io::Dataset dataset = input_fn(input_context());
  if (num_workers() > 1) {
    io::ShardedDataset sharded = io::auto_shard(dataset, num_workers(), worker_index());
    LOG(INFO) << "input of worker " << worker_index() << " of " << num_workers() << ": "
              << sharded.plan;
    dataset = std::move(sharded.dataset);
  }
  return DistributedDataset(std::move(dataset), devices_, /*split_batches=*/false);
}

std::vector<Device> parse_devices(const std::string& text) {
  std::vector<Device> devices;
  if (text.empty()) {
    for (int i = 0; i < num_gpus(); ++i) devices.push_back(Device::gpu(i));
    if (devices.empty()) devices.push_back(Device::cpu(0));
    return devices;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) {
      throw InvalidArgumentError(str_cat("devices '", text,
                                         "' has an empty entry; expected e.g. "
                                         "cpu:0,cpu:1; available: ",
                                         join(available_devices())));
    }
    devices.push_back(parse_device(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return devices;
}

}  // namespace cadre
