#include "tools/cadre_bench/train_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/io/idx.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "cadre/runtime/threading.h"
#include "cadre/strategies/strategy_from_flags.h"
#include "core/base/strings.h"
#include "core/kernels/nn.h"
#include "core/tensor/device_backend.h"
#include "examples/fashion_mnist/models.h"
#include "strategies/strategy_extended.h"
#include "tools/cadre_bench/ps_bench.h"
#include "tools/cadre_bench/timing.h"

DEFINE_string(model, "mlp", "mlp or cnn");
DEFINE_int32(batch_size, 256, "global batch size");
DEFINE_int32(steps, 0, "measured steps in all (0: windows of about --window_s seconds)");
DEFINE_int32(windows, 7, "timing windows; the median is reported");
DEFINE_double(window_s, 1.0, "seconds per window when --steps is 0");
DEFINE_int32(threads, 0, "intra-op threads (0: every core, or CADRE_NUM_THREADS)");
DEFINE_string(strategy, "one_device",
              "one_device, mirrored, central_storage, multi_worker_mirrored or parameter_server "
              "(the last two under TF_CONFIG)");
DEFINE_string(devices, "cpu:0", "devices to train on, e.g. cpu:0,cpu:1 or gpu:0");
DEFINE_string(float32_precision, "float32", "GPU products: float32, tf32 or bf16");
DEFINE_string(gpu_convolution, "autotune", "GPU convolutions: autotune, cudnn or im2col");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist", "directory of the IDX .gz files");
DEFINE_bool(pool_as_computed, true,
            "GPU: a first convolution whose output only a max pooling reads runs when the "
            "pooling does and is not kept (false: kept, as before that change, to measure it)");
DEFINE_bool(peak_phases, false,
            "after the windows, one more step whose forward pass, backward pass and update each "
            "report their peak device memory (one device only): where the step's peak falls");

namespace cadre::bench {
namespace {

// Trains on shuffled batches gathered from the in-memory training set: on one device
// directly, or through a strategy's replicas (each gathers its part of the global batch on
// its own device, and the gradients are averaged across replicas).
class Trainer {
 public:
  Trainer(const Tensor& images, const Tensor& labels, std::shared_ptr<Strategy> strategy)
      : images_(images),
        labels_(labels),
        store_(0),
        shuffle_(0, 1),
        optimizer_(nn::optimizers::adam(1e-3)),
        strategy_(std::move(strategy)) {
    if (strategy_) {
      variables_ = strategy_->create_variables(0);
      strategy_->extended().broadcast_from_chief(
          0);  // the start step: every worker takes the chief's
      for (const Device& d : strategy_->devices()) {
        replica_images_.push_back(images_.to(d));
        replica_labels_.push_back(labels_.to(d));
      }
    }
  }

  void step() {
    if (position_ + FLAGS_batch_size > images_.shape()[0]) reshuffle();
    Tensor ids = order_.slice(0, position_, position_ + FLAGS_batch_size);
    position_ += FLAGS_batch_size;
    if (strategy_) {
      replicated_step(ids);
      return;
    }
    nn::VariableStoreScope scope(store_);
    GradientTape tape;
    Tensor logits = examples::model_logits(FLAGS_model, gather(images_, ids));
    Tensor loss = nn::sparse_softmax_cross_entropy(gather(labels_, ids), logits);
    optimizer_->minimize(tape, loss);
    last_loss_ = loss;
  }
  float last_loss() const { return last_loss_.item<float>(); }

  // Each phase's peak is measured from the memory in use when it starts, so the three say
  // which phase sets the step's peak and by how much.
  struct PhasePeaks {
    int64_t before = 0, forward = 0, backward = 0, update = 0;
  };
  PhasePeaks phase_peaks(Device device) {
    if (position_ + FLAGS_batch_size > images_.shape()[0]) reshuffle();
    Tensor ids = order_.slice(0, position_, position_ + FLAGS_batch_size);
    position_ += FLAGS_batch_size;
    nn::VariableStoreScope scope(store_);
    std::vector<nn::Variable*> variables = store_.trainable_variables();
    std::vector<Tensor> sources;
    for (nn::Variable* v : variables) sources.push_back(v->tensor());
    PhasePeaks peaks;
    peaks.before = memory_stats(device).bytes_in_use;
    reset_peak_memory(device);
    GradientTape tape;
    Tensor logits = examples::model_logits(FLAGS_model, gather(images_, ids));
    Tensor loss = nn::sparse_softmax_cross_entropy(gather(labels_, ids), logits);
    peaks.forward = memory_stats(device).peak_bytes_in_use;
    reset_peak_memory(device);
    std::vector<Gradient> gradients = tape.gradient(loss, sources);
    peaks.backward = memory_stats(device).peak_bytes_in_use;
    reset_peak_memory(device);
    optimizer_->apply_gradients(std::move(gradients), variables);
    peaks.update = memory_stats(device).peak_bytes_in_use;
    last_loss_ = loss;
    return peaks;
  }

 private:
  // Workers in sync draw the same global batch and each replica of each worker trains on its
  // rows; workers of parameter servers each train on a batch of their own.
  void replicated_step(const Tensor& ids) {
    int64_t per = FLAGS_batch_size / strategy_->num_replicas_in_sync();
    int first = strategy_->num_workers_in_sync() > 1
                    ? strategy_->worker_index() * strategy_->num_local_replicas()
                    : 0;
    PerReplica<Tensor> losses = strategy_->run<Tensor>(*variables_, [&](ReplicaContext& ctx) {
      int r = ctx.replica_id();
      int64_t g = first + r;
      Tensor mine = ids.slice(0, g * per, (g + 1) * per).to(ctx.device());
      GradientTape tape;
      Tensor logits = examples::model_logits(FLAGS_model, gather(replica_images_[r], mine));
      Tensor loss = nn::sparse_softmax_cross_entropy(gather(replica_labels_[r], mine), logits);
      ctx.apply_gradients(*optimizer_, tape.gradient(loss, ctx.trainable_sources()), per);
      return loss;
    });
    last_loss_ = losses[0];
  }

  void reshuffle() {
    int64_t n = images_.shape()[0];
    std::vector<float> keys =
        random_uniform({n}, 0, 1, DType::kFloat32, &shuffle_).to_vector<float>();
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
    order_ = Tensor::from_vector(perm);
    position_ = 0;
  }

  Tensor images_, labels_, order_, last_loss_;
  int64_t position_ = INT64_MAX / 2;
  nn::VariableStore store_;
  Generator shuffle_;
  std::shared_ptr<nn::Optimizer> optimizer_;
  std::shared_ptr<Strategy> strategy_;
  std::unique_ptr<DistributedVariables> variables_;
  std::vector<Tensor> replica_images_, replica_labels_;
};

// --strategy under TF_CONFIG; null for one_device.
std::shared_ptr<Strategy> strategy_from_command_line() {
  if (FLAGS_strategy == "one_device") return nullptr;
  std::optional<ClusterConfig> cluster;
  if (const char* tf_config = std::getenv("TF_CONFIG"); tf_config && *tf_config) {
    cluster = parse_tf_config(tf_config);
    cluster->security = ClusterSecurity::from_environment();
  }
  std::shared_ptr<Strategy> strategy =
      strategy_from_flags(FLAGS_strategy, FLAGS_devices, cluster ? &*cluster : nullptr);
  if (FLAGS_batch_size % strategy->num_replicas_in_sync() != 0) {
    throw InvalidArgumentError(str_cat("--batch_size=", FLAGS_batch_size, " does not divide over ",
                                       strategy->num_replicas_in_sync(), " replicas"));
  }
  return strategy;
}

// Threads, GPU precision and convolutions, and the pooled first convolution, per the flags.
void set_process_options(Device device) {
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);
  set_float32_precision(parse_float32_precision(FLAGS_float32_precision));
  set_gpu_convolution(parse_gpu_convolution(FLAGS_gpu_convolution));
  if (!FLAGS_pool_as_computed && kernels::conv2d_max_pool_suits.has(device)) {
    kernels::conv2d_max_pool_suits.set(
        device.type,
        +[](const Tensor&, const Tensor&, const kernels::Conv2DParams&) { return false; });
  }
}

}  // namespace

int run_train() {
  if (serve_if_ps()) return 0;  // a ps task of --strategy=parameter_server
  examples::check_model_name(FLAGS_model);
  if (FLAGS_batch_size <= 0 || FLAGS_windows <= 0) {
    throw InvalidArgumentError("--batch_size and --windows must be positive");
  }
  std::shared_ptr<Strategy> strategy = strategy_from_command_line();
  Device device = strategy ? strategy->devices()[0] : parse_devices(FLAGS_devices).front();
  set_process_options(device);
  DeviceScope on_device(device);

  io::ImagesAndLabels data = io::read_mnist(FLAGS_data_dir, io::Split::kTrain);
  Tensor images = (cast(data.images, DType::kFloat32).reshape({-1, 784}) / 255.0).to(device);
  Tensor labels = cast(data.labels, DType::kInt64).to(device);
  Trainer trainer(images, labels, strategy);

  // The first steps build plans and caches (on a GPU, cuBLASLt's heuristics and the
  // allocator's blocks): sizing the windows by them made a GPU's windows 20 times too short.
  for (int i = 0; i < 20; ++i) trainer.step();
  trainer.last_loss();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) trainer.step();
  trainer.last_loss();
  double calibration = seconds_since(start);
  int per_window = FLAGS_steps > 0
                       ? std::max(1, FLAGS_steps / FLAGS_windows)
                       : std::max(5, static_cast<int>(FLAGS_window_s * 20 / calibration));
  // Workers that train in lockstep must agree on the number of steps.
  if (strategy && strategy->num_workers_in_sync() > 1) {
    per_window = static_cast<int>(strategy->extended().broadcast_from_chief(per_window));
  }
  reset_peak_memory(device);
  std::vector<double> rates, step_ms;
  for (int w = 0; w < FLAGS_windows; ++w) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_window; ++i) trainer.step();
    trainer.last_loss();
    double s = seconds_since(t0);
    rates.push_back(per_window * FLAGS_batch_size / s);
    step_ms.push_back(1000 * s / per_window);
    LOG(INFO) << "window " << w + 1 << ": " << static_cast<int64_t>(rates.back()) << " ex/s";
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  std::sort(step_ms.begin(), step_ms.end());
  AllocatorStats mem = memory_stats(device);
  std::printf(
      "{\"model\":\"%s\",\"strategy\":\"%s\",\"batch_size\":%d,\"threads\":%d,\"device\":\"%s\","
      "\"examples_per_sec\":%.0f,\"step_ms_median\":%.3f,\"min\":%.0f,\"max\":%.0f,"
      "\"peak_bytes\":%lld,\"final_loss\":%.4f,\"float32_precision\":\"%s\","
      "\"pool_as_computed\":%s}\n",
      FLAGS_model.c_str(), FLAGS_strategy.c_str(), FLAGS_batch_size, current_thread_budget(),
      (strategy ? join(strategy->devices(), ",") : device.to_string()).c_str(),
      sorted[sorted.size() / 2], step_ms[step_ms.size() / 2], sorted.front(), sorted.back(),
      static_cast<long long>(mem.peak_bytes_in_use), trainer.last_loss(),
      FLAGS_float32_precision.c_str(), FLAGS_pool_as_computed ? "true" : "false");
  if (FLAGS_peak_phases && !strategy) {
    Trainer::PhasePeaks p = trainer.phase_peaks(device);
    std::printf(
        "{\"peak_phases\":\"%s %d\",\"in_use_before\":%lld,\"forward\":%lld,"
        "\"backward\":%lld,\"update\":%lld}\n",
        FLAGS_model.c_str(), FLAGS_batch_size, static_cast<long long>(p.before),
        static_cast<long long>(p.forward), static_cast<long long>(p.backward),
        static_cast<long long>(p.update));
  }
  return 0;
}

}  // namespace cadre::bench
