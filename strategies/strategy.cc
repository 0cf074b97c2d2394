#include "cadre/strategies/strategy.h"

#include <glog/logging.h>

#include <optional>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/cross_replica.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/runtime/threading.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "io/auto_shard.h"
#include "io/element_codec.h"
#include "io/virtual_shards.h"
#include "strategies/replica_group.h"
#include "strategies/strategy_extended.h"

namespace cadre {

Strategy::Strategy(std::unique_ptr<StrategyExtended> extended) : extended_(std::move(extended)) {
  ensure_logging();  // a custom training loop may start here, before any Estimator
}

Strategy::~Strategy() = default;

const StrategyExtended& Strategy::extended() const { return *extended_; }
const std::vector<Device>& Strategy::devices() const { return extended_->devices(); }
int Strategy::num_workers() const { return extended_->num_workers(); }
int Strategy::worker_index() const { return extended_->worker_index(); }
int Strategy::num_workers_in_sync() const { return extended_->num_workers_in_sync(); }

std::string Strategy::topology() const {
  const std::vector<Device>& d = devices();
  return str_cat(d.size(), d.size() == 1 ? " replica on " : " replicas on ", join(d));
}

std::unique_ptr<DistributedVariables> Strategy::create_variables(
    uint64_t seed, nn::VariableCreator creator) const {
  return extended_->create_variables(seed, std::move(creator));
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
  extended_->before_run(variables);
  ReplicaGroup group(replicas);
  auto body = [&](int r) {
    DeviceScope device_scope(devices()[r]);
    ReplicaThreadScope threads(replicas);
    nn::VariableStoreScope store_scope(variables.store(r));
    std::optional<GeneratorScope> generator_scope;
    if (generators) generator_scope.emplace((*generators)[r]);
    ReplicaContext context(*extended_, group, variables, r);
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
    MutexLock lock(threads_mutex_);
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
  if (values.size() != devices().size()) {
    throw InvalidArgumentError(
        str_cat("reduce: ", values.size(), " values for ", devices().size(), " replicas"));
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
  std::vector<Device> destinations(values.size(), devices()[0]);
  if (num_workers_in_sync() == 1) {
    return extended_->cross_device_ops().batch_reduce(op, lists, w, destinations)[0][0].dense();
  }
  // Every replica of the job, as tf.distribute's reduce under MultiWorkerMirrored: the
  // worker's weighted sum, summed across workers with the weights, then divided for a mean.
  std::vector<Gradient> sum =
      extended_->cross_device_ops().batch_reduce(ReduceOp::kSum, lists, w, destinations)[0];
  double total = 0;
  for (double x : w) total += x;
  extended_->cross_worker_sum(sum, total);
  NoGradScope no_grad;
  Tensor result = to_device(sum[0].dense(), devices()[0]);
  return op == ReduceOp::kMean ? result * (1.0 / total) : result;
}

Tensor Strategy::gather(const PerReplica<Tensor>& values, int axis) const {
  if (values.size() != devices().size()) {
    throw InvalidArgumentError(
        str_cat("gather: ", values.size(), " values for ", devices().size(), " replicas"));
  }
  NoGradScope no_grad;
  std::vector<Tensor> here;
  for (const Tensor& v : values) here.push_back(to_device(v, devices()[0]));
  Tensor local = concat(here, axis);
  if (num_workers_in_sync() == 1) return local;
  // Every worker's concatenation, in worker order (replica order across the job), through
  // host bytes: workers may hold different lengths along `axis`, as batches may differ.
  std::vector<Tensor> all;
  std::string own;
  io::encode_element(io::Element(local), own);
  for (const std::string& bytes : extended_->all_gather_bytes(std::move(own))) {
    size_t offset = 0;
    io::Element element = io::decode_element(bytes, offset, "a worker's gathered values");
    all.push_back(to_device(element.features.at("value"), devices()[0]));
  }
  for (size_t w = 1; w < all.size(); ++w) {
    Shape a = all[w].shape(), b = all[0].shape();
    bool same = a.rank() == b.rank() && all[w].dtype() == all[0].dtype();
    for (int d = 0; same && d < a.rank(); ++d) same = d == axis || a[d] == b[d];
    if (!same) {
      throw InvalidArgumentError(str_cat("gather: worker ", w, "'s values are ",
                                         dtype_name(all[w].dtype()), " ", a, ", worker 0's ",
                                         dtype_name(all[0].dtype()), " ", b,
                                         "; they may differ only along axis ", axis));
    }
  }
  return concat(all, axis);
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
    return DistributedDataset(dataset, devices(), /*split_batches=*/true, split);
  }
  // Workers that step on their own each take their own batches.
  io::ShardedDataset sharded = io::auto_shard(dataset, num_workers(), worker_index());
  LOG(INFO) << "input of worker " << worker_index() << " of " << num_workers() << ": "
            << sharded.plan;
  return DistributedDataset(sharded.dataset, devices(), /*split_batches=*/true);
}

DistributedDataset Strategy::distribute_datasets_from_function(const InputFn& input_fn) const {
  io::Dataset dataset = input_fn(input_context());
  if (num_workers() > 1) {
    io::ShardedDataset sharded = io::auto_shard(dataset, num_workers(), worker_index());
    LOG(INFO) << "input of worker " << worker_index() << " of " << num_workers() << ": "
              << sharded.plan;
    dataset = std::move(sharded.dataset);
  }
  return DistributedDataset(std::move(dataset), devices(), /*split_batches=*/false);
}

DistributedDataset Strategy::distribute_datasets_from_function(const InputFn& input_fn,
                                                               int64_t input_shards,
                                                               bool part_rows) const {
  if (part_rows && num_workers_in_sync() != num_workers()) {
    throw InvalidArgumentError(
        str_cat("a reduction in shard order needs workers that step "
                "together; ",
                name(), "'s workers step on their own"));
  }
  if (input_shards < num_workers()) {
    throw InvalidArgumentError(str_cat("the input is read as ", input_shards,
                                       " input shards and this job has ", num_workers(),
                                       " workers; run at most ", input_shards, " workers"));
  }
  auto [first, last] = io::owned_shards(input_shards, num_workers(), worker_index());
  io::InputContext context;
  context.num_input_pipelines = static_cast<int>(input_shards);
  context.input_pipeline_id = static_cast<int>(first);
  context.num_replicas_in_sync = static_cast<int>(input_shards);
  // A worker reads each shard to its end: its shards may be uneven (a resize handed them
  // over from workers that stepped more or less, a ps job's workers stepping at their own
  // pace). Workers that step together go on until every one's input has ended, those whose
  // input ended first with no rows. A reduction in shard order needs every shard's rows
  // each step: its input ends with its first shard.
  io::VirtualShards shards = io::read_virtual_shards(input_fn(context), input_shards, first, last,
                                                     part_rows, /*to_every_end=*/!part_rows);
  LOG(INFO) << "input of worker " << worker_index() << " of " << num_workers() << ": "
            << shards.plan;
  if (part_rows) {
    if (num_local_replicas() != 1) {
      throw InvalidArgumentError(
          str_cat("a reduction in shard order needs one replica per worker; ", name(), " has ",
                  num_local_replicas()));
    }
    return DistributedDataset(std::move(shards.dataset), devices(), /*split_batches=*/false);
  }
  return DistributedDataset(std::move(shards.dataset), devices(), /*split_batches=*/true,
                            BatchSplit{0, num_local_replicas()});
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
