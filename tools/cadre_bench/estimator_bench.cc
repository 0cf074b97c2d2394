#include "tools/cadre_bench/estimator_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/estimator.h"
#include "cadre/io/mnist.h"
#include "cadre/keras/model.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "cadre/runtime/threading.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/strategy_from_flags.h"
#include "core/base/strings.h"
#include "core/nn/deferred_copy.h"
#include "examples/fashion_mnist/models.h"
#include "tools/cadre_bench/step_times.h"
#include "tools/cadre_bench/timing.h"

DECLARE_string(model);
DECLARE_int32(batch_size);
DECLARE_int32(threads);
DECLARE_string(data_dir);
DECLARE_string(strategy);
DECLARE_string(devices);
DECLARE_string(transport);
DECLARE_string(float32_precision);
DECLARE_string(gpu_convolution);
DEFINE_int64(train_steps, 3000, "estimator: steps to train (the first 100 are not timed)");
DEFINE_int64(save_every, 0, "estimator: checkpoint every this many steps (0: at the end only)");
DEFINE_bool(sync_save, false, "estimator: write checkpoints on the training thread");
DEFINE_double(durable_secs, 30,
              "estimator: RunConfig.checkpoint_durable_secs, fsync a checkpoint at least this "
              "often (0: every one)");
DEFINE_string(model_dir, "", "estimator: model_dir (default: a temporary one, removed after)");
DEFINE_bool(autotune, true,
            "estimator: RunConfig.intra_op_autotune (the thread count follows the step time)");
DEFINE_int64(profile_every_n_steps, 0,
             "estimator: RunConfig.profile_every_n_steps, a profile summary in the log every this "
             "many steps (0: profiler off), to measure what profiling costs");
DEFINE_string(api, "estimator",
              "estimator: train through Estimator::train (estimator) or the same model as a "
              "keras::Sequential through Model::fit, one epoch of --train_steps steps (keras)");
DEFINE_bool(overlap, true,
            "estimator --strategy=multi_worker_mirrored: sum gradient buckets while the "
            "backward pass runs (MultiWorkerOptions.overlap_gradients)");
DEFINE_int64(first_bucket_bytes, 1 << 20,
             "estimator --strategy=multi_worker_mirrored: MultiWorkerOptions.first_bucket_bytes");
DEFINE_int64(bucket_bytes, 25 << 20,
             "estimator --strategy=multi_worker_mirrored: MultiWorkerOptions.bucket_bytes");
DEFINE_int64(piece_bytes, 0,
             "estimator --strategy=multi_worker_mirrored: MultiWorkerOptions.piece_bytes (0: "
             "gradients whole)");
DEFINE_bool(shard_input, false,
            "estimator: the input_fn shards the examples by worker before shuffling");
DEFINE_int64(prefetch, -1,
             "estimator: the input's prefetch buffer in batches (-1: autotuned, 0: no prefetch)");
DEFINE_bool(keras_accuracy, false, "estimator --api=keras: compile with metrics {\"accuracy\"}");

namespace cadre::bench {
namespace {

constexpr int64_t kUntimedSteps = 100;

EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       const Params&) {
  Tensor logits = examples::model_logits(FLAGS_model, features.at("image"));
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  return EstimatorSpec::train(loss, nn::optimizers::adam(1e-3));
}

Dataset input_fn(const InputContext& context) {
  Dataset images = io::fashion_mnist(FLAGS_data_dir, io::Split::kTrain, io::ImageFormat::kRawBytes);
  // --shard_input: each worker reads its own share of the examples (TensorFlow's advice for
  // speed), instead of the auto-sharding that keeps every other batch of one pipeline.
  if (FLAGS_shard_input) {
    images = images.shard(context.num_input_pipelines, context.input_pipeline_id);
  }
  Dataset batches =
      images.shuffle(10'000, 0)
          .repeat()
          .batch(context.per_replica_batch_size(FLAGS_batch_size), /*drop_remainder=*/true)
          .map(io::scale_pixels_fn());
  return FLAGS_prefetch == 0 ? batches : batches.prefetch(FLAGS_prefetch);
}

class StepTimesHook : public Hook {
 public:
  explicit StepTimesHook(StepTimes& times) : times_(times) {}
  void before_run(Run&, RunContext&) override { times_.begins.push_back(Clock::now()); }
  void after_run(Run&, const StepResult& result, RunContext&) override {
    times_.steps.push_back(result.global_step);
    times_.ends.push_back(Clock::now());
  }

 private:
  StepTimes& times_;
};

// The same from fit's batch callbacks (called from fit's own hook, in the same place). The
// fit is one epoch from step 0, so batch b ends global step b + 1.
class StepTimesCallback : public keras::Callback {
 public:
  explicit StepTimesCallback(StepTimes& times) : times_(times) {}
  void on_train_batch_begin(int64_t, const keras::Logs&) override {
    times_.begins.push_back(Clock::now());
  }
  void on_train_batch_end(int64_t batch, const keras::Logs&) override {
    times_.steps.push_back(batch + 1);
    times_.ends.push_back(Clock::now());
  }

 private:
  StepTimes& times_;
};

// examples/fashion_mnist/models.h's models as Keras layers, with the same variable shapes
// and the same ops (dense and conv2d with their activation fused).
keras::Sequential keras_model(const std::string& model) {
  using namespace keras;
  if (model == "mlp") {
    return Sequential(
        {InputLayer({784}, {.name = "image"}), Dense(256, "relu"), Dense(256, "relu"), Dense(10)});
  }
  return Sequential({InputLayer({784}, {.name = "image"}), Reshape({28, 28, 1}),
                     Conv2D(32, {3, 3}, "relu"), MaxPooling2D({2, 2}), Conv2D(64, {3, 3}, "relu"),
                     MaxPooling2D({2, 2}), Flatten(), Dense(128, "relu"), Dense(10)});
}

// Trains as the flags say through the API named by --api; returns the last checkpoint (none
// on a worker that is not the chief).
std::string train(const RunConfig& config, StepTimes& times) {
  if (FLAGS_api == "estimator") {
    Estimator estimator(model_fn, config);
    TrainArgs args;
    args.max_steps = FLAGS_train_steps;
    args.hooks = {std::make_shared<StepTimesHook>(times)};
    estimator.train(input_fn, args);
    return estimator.latest_checkpoint().value_or("");
  }
  keras::Sequential model = keras_model(FLAGS_model);
  std::vector<keras::Metric> metrics;
  if (FLAGS_keras_accuracy) metrics.push_back("accuracy");
  model.compile({.optimizer = nn::optimizers::adam(1e-3),
                 .loss = keras::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = metrics,
                 .config = config});
  // One epoch of all the steps: fit's end-of-epoch checkpoint is the Estimator's final one.
  model.fit(input_fn, {.epochs = 1,
                       .steps_per_epoch = FLAGS_train_steps,
                       .callbacks = {std::make_shared<StepTimesCallback>(times)},
                       .verbose = 0});
  return checkpoint::latest_checkpoint(config.model_dir).value_or("");
}

// Plain copies of every variable and slot (medians of 21 rounds): memcpy into memory that
// holds a copy already and is in cache, and into memory last touched 15 copies ago (out of
// cache, as a snapshot's memory is between saves).
struct PlainCopies {
  double warm_ms = 0;
  double cold_ms = 0;
};

PlainCopies plain_copies(const std::string& checkpoint) {
  auto reader = checkpoint::CheckpointReader::open(checkpoint);
  constexpr int kSets = 16;
  std::vector<Tensor> sources;
  std::vector<std::vector<Tensor>> sets(kSets);
  for (const auto& [name, info] : reader->variables()) {
    sources.push_back(reader->read(name));
    for (auto& set : sets) set.push_back(sources.back().clone());
  }
  auto copy_into = [&](std::vector<Tensor>& set) {
    auto start = Clock::now();
    for (size_t i = 0; i < sources.size(); ++i) {
      std::memcpy(set[i].raw_data(), sources[i].raw_data(), sources[i].nbytes());
    }
    return ms_between(start, Clock::now());
  };
  std::vector<double> warm, cold;
  for (int round = 0; round < 21 * kSets; ++round) {
    cold.push_back(copy_into(sets[round % kSets]));
  }
  for (int round = 0; round < 21; ++round) warm.push_back(copy_into(sets[0]));
  return {median(warm), median(cold)};
}

void check_flags() {
  examples::check_model_name(FLAGS_model);
  if (FLAGS_api != "estimator" && FLAGS_api != "keras") {
    throw InvalidArgumentError(
        str_cat("unknown --api '", FLAGS_api, "'; expected estimator or keras"));
  }
  if (FLAGS_batch_size <= 0 || FLAGS_train_steps <= 2 * kUntimedSteps || FLAGS_save_every < 0) {
    throw InvalidArgumentError(str_cat("--batch_size must be positive, --train_steps above ",
                                       2 * kUntimedSteps, " and --save_every 0 or more"));
  }
}

// --strategy (with the multi-worker options the flags give) for the cluster of `config`.
void set_strategy(RunConfig& config) {
  if (FLAGS_strategy != "multi_worker_mirrored" || !config.cluster) {
    // one_device too, so that --devices=gpu:0 trains there.
    config.train_distribute = strategy_from_flags(FLAGS_strategy, FLAGS_devices,
                                                  config.cluster ? &*config.cluster : nullptr);
    return;
  }
  if (FLAGS_transport != "auto" && FLAGS_transport != "gloo") {
    throw InvalidArgumentError(str_cat("--transport=", FLAGS_transport, ": expected auto or gloo"));
  }
  MultiWorkerOptions options;
  options.shared_memory = FLAGS_transport == "auto";
  options.overlap_gradients = FLAGS_overlap;
  if (FLAGS_first_bucket_bytes <= 0 || FLAGS_bucket_bytes <= 0 || FLAGS_piece_bytes < 0) {
    throw InvalidArgumentError(str_cat("--first_bucket_bytes=", FLAGS_first_bucket_bytes,
                                       ", --bucket_bytes=", FLAGS_bucket_bytes,
                                       ", --piece_bytes=", FLAGS_piece_bytes,
                                       ": expected positive byte counts (0 also for "
                                       "--piece_bytes)"));
  }
  options.first_bucket_bytes = static_cast<size_t>(FLAGS_first_bucket_bytes);
  options.bucket_bytes = static_cast<size_t>(FLAGS_bucket_bytes);
  options.piece_bytes = static_cast<size_t>(FLAGS_piece_bytes);
  config.train_distribute =
      MultiWorkerMirroredStrategy::create(*config.cluster, parse_devices(FLAGS_devices), options);
}

// The run's configuration: the cluster of TF_CONFIG if any, the strategy, and the flags'
// checkpoint settings, with logging and summaries out of the way.
RunConfig bench_config(const std::string& model_dir) {
  RunConfig config;
  if (const char* tf_config = std::getenv("TF_CONFIG"); tf_config && *tf_config) {
    ClusterConfig cluster = parse_tf_config(tf_config);
    cluster.security = ClusterSecurity::from_environment();
    config = RunConfig::for_cluster(cluster);
  }
  set_strategy(config);
  config.model_dir = model_dir;
  config.tf_random_seed = 0;
  config.save_checkpoints_steps = FLAGS_save_every > 0 ? FLAGS_save_every : int64_t{1} << 40;
  config.async_checkpoint = !FLAGS_sync_save;
  config.checkpoint_durable_secs = FLAGS_durable_secs;
  config.intra_op_autotune = FLAGS_autotune;
  config.save_summary_steps = 0;
  config.log_step_count_steps = int64_t{1} << 40;
  config.progress_line = RunConfig::ProgressLine::kOff;
  config.profile_every_n_steps = FLAGS_profile_every_n_steps;
  return config;
}

// One JSON line of the run's figures.
void print_result(const StepStats& stats, double fence_ms, const PlainCopies& copies,
                  const checkpoint::CheckpointSizes& sizes, double peak_rss_mb) {
  std::printf(
      "{\"api\":\"%s\",\"model\":\"%s\",\"batch_size\":%d,\"threads\":%d,\"save_every\":%lld,"
      "\"async\":%s,\"durable_secs\":%g,\"examples_per_sec\":%.0f,\"window_min\":%.0f,\"window_"
      "max\":%.0f,"
      "\"step_ms_median\":%.3f,\"saves_timed\":%zu,"
      "\"save_blocked_ms\":%.3f,\"save_fence_ms\":%.4f,\"save_step_extra_ms\":%.3f,\"save_cost_"
      "ms\":%.3f,\"copy_warm_ms\":%.3f,\"copy_cold_ms\":%.3f,"
      "\"checkpoint_bytes\":%llu,\"variables_bytes\":%llu,\"slots_bytes\":%llu,"
      "\"input_bytes\":%llu,\"peak_rss_mb\":%.0f,\"profile_every_n_steps\":%lld}\n",
      FLAGS_api.c_str(), FLAGS_model.c_str(), FLAGS_batch_size, current_thread_budget(),
      static_cast<long long>(FLAGS_save_every), FLAGS_sync_save ? "false" : "true",
      FLAGS_durable_secs, stats.rate, stats.window_min, stats.window_max, stats.step_ms_median,
      stats.saves_timed, stats.blocked_ms, fence_ms, stats.extra_ms, stats.save_cost_ms,
      copies.warm_ms, copies.cold_ms, static_cast<unsigned long long>(sizes.file),
      static_cast<unsigned long long>(sizes.variables),
      static_cast<unsigned long long>(sizes.slots), static_cast<unsigned long long>(sizes.input),
      peak_rss_mb, static_cast<long long>(FLAGS_profile_every_n_steps));
}

}  // namespace

int run_estimator() {
  check_flags();
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);
  set_float32_precision(parse_float32_precision(FLAGS_float32_precision));
  set_gpu_convolution(parse_gpu_convolution(FLAGS_gpu_convolution));
  std::string model_dir = FLAGS_model_dir;
  bool temporary = model_dir.empty();
  if (temporary) {
    model_dir = (std::filesystem::temp_directory_path() /
                 ("cadre_bench_estimator." + std::to_string(::getpid())))
                    .string();
  }
  // The temporary model_dir goes with the run however it ends, a peer's failure included.
  struct RemovedAtExit {
    std::string path;
    ~RemovedAtExit() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
  } removed_at_exit{temporary ? model_dir : std::string()};
  StepTimes times;
  std::string latest = train(bench_config(model_dir), times);
  StepStats stats = step_stats(times, kUntimedSteps, FLAGS_save_every, FLAGS_batch_size);
  // Training also waits where an update reaches a variable before the background copy of
  // a save did (nn::finish_deferred_copies): that time per save, counted with the blocking.
  int64_t saves = FLAGS_save_every > 0 ? FLAGS_train_steps / FLAGS_save_every : 0;
  double fence_ms = saves > 0 ? 1e3 * nn::deferred_copy_wait_seconds() / saves : 0;

  // Peak resident memory of the training run (before the copies measured below).
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  double peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  // A worker other than the chief writes no checkpoint: its line has no checkpoint figures.
  checkpoint::CheckpointSizes sizes{};
  PlainCopies copies;
  if (!latest.empty()) {
    sizes = checkpoint::CheckpointReader::open(latest)->sizes();
    copies = plain_copies(latest);
  }
  print_result(stats, fence_ms, copies, sizes, peak_rss_mb);
  return 0;
}

}  // namespace cadre::bench
