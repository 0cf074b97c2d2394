// Trains and evaluates a Fashion-MNIST classifier with the Estimator (../shared/CONTRACTS.md,
// `examples/fashion_mnist`). Its role comes from TF_CONFIG: a chief trains and marks the end
// of training, an evaluator follows the chief's checkpoints and evaluates each. Without
// TF_CONFIG it runs in local mode: it trains to --max_steps, checkpointing every
// --save_checkpoints_steps and evaluating each checkpoint on the test set, and prints the
// final result as one JSON line:
//
//   fashion_mnist --model_dir=runs/fmnist --model=mlp
//   {"task":"local","model":"mlp","global_step":2000,"accuracy":0.8812,"loss":0.3301}
//
// Run it again with the same flags and it resumes from the last checkpoint (returning at
// once when --max_steps is already reached).
//
// With --export, each evaluation also exports the model (a LatestExporter) as a new
// numbered version under model_dir/export/latest/; with --serve=EXPORT_BASE the program
// instead serves those versions over TensorFlow Serving's REST and gRPC APIs until SIGTERM,
// following new versions as training exports them (README.md, "Serving"):
//
//   fashion_mnist --serve=runs/fmnist/export/latest --rest_port=8501 --grpc_port=8500 \
//                 --model_name=fmnist
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cctype>
#include <cmath>
#include <cstdio>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/exporters.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/mnist.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"
#include "cadre/runtime/threading.h"
#include "cadre/serving/model_server.h"
#include "cadre/strategies/strategy_from_flags.h"
#include "examples/fashion_mnist/models.h"
#include "examples/program_main.h"
#include "examples/result_line.h"

DEFINE_string(model_dir, "", "checkpoints and summaries (required)");
DEFINE_string(model, "mlp", "mlp (784-256-256-10), mlp:N (784-N-N-10) or cnn");
DEFINE_string(strategy, "one_device",
              "one_device, mirrored, central_storage, multi_worker_mirrored, parameter_server");
DEFINE_string(devices, "", "devices, e.g. cpu:0,cpu:1 (default: all GPUs, else cpu:0)");
DEFINE_int64(max_steps, 2000, "global step to stop at");
DEFINE_int64(batch_size, 128, "global batch size");
DEFINE_double(learning_rate, 0.001, "Adam learning rate");
DEFINE_int64(save_checkpoints_steps, 500, "checkpoint interval in steps");
DEFINE_int64(log_step_count_steps, 100, "the chief logs its step, loss and speed this often");
DEFINE_int32(keep_checkpoint_max, 5, "checkpoints kept (0: every one, as in TensorFlow)");
DEFINE_int64(input_shards, 0,
             "read the training input as this many shards, so that a job resumed with "
             "another number of workers reads every example once (0: one per worker)");
DEFINE_bool(deterministic, false,
            "with --input_shards: steps that are the same bits for any number of workers "
            "(gradients per shard, added in shard order)");
DEFINE_bool(elastic, false,
            "multi_worker_mirrored: a worker that dies leaves the group, the others step on "
            "without it, and it rejoins when restarted (cadre_launch --elastic)");
DEFINE_double(heartbeat_timeout_secs, 10,
              "multi-worker: how long a task may be silent before it is declared dead");
DEFINE_int64(steps_per_unit, 10,
             "coordinator mode (a client task) with ps tasks: steps the client hands a worker "
             "at a time");
DEFINE_int64(eval_steps, 0, "eval batches per checkpoint; 0 = the whole test set");
DEFINE_string(data_dir, cadre::io::kFashionMnistDirectory, "directory of the IDX .gz files");
DEFINE_uint64(seed, 42, "global seed");
DEFINE_int32(threads, 0, "intra-op threads (0: all cores, or CADRE_NUM_THREADS)");
DEFINE_int64(profile_every_n_steps, 0,
             "log where the time went (per phase, top kernels) every this many steps; 0: off");
DEFINE_string(profile_trace_steps, "",
              "FIRST,LAST: write a Chrome trace of global steps [FIRST, LAST) to "
              "model_dir/profile/trace-FIRST.json (open it in ui.perfetto.dev); empty: none");
DEFINE_bool(export, false,
            "export the model after each evaluation as a numbered version under "
            "model_dir/export/latest/ (a LatestExporter)");
DEFINE_string(serve, "",
              "serve the versions under this export base (TensorFlow Serving's REST and gRPC "
              "APIs) until SIGTERM instead of training; --model must name the exported model");
DEFINE_int32(rest_port, 8501, "--serve: the REST API's port (-1: none)");
DEFINE_int32(grpc_port, 8500, "--serve: the gRPC API's port (-1: none)");
DEFINE_string(model_name, "fashion_mnist", "--serve: the model's name in requests");
DEFINE_string(serve_host, "127.0.0.1", "--serve: the address to listen on (0.0.0.0: every one)");
DEFINE_string(model_version_policy, "latest",
              "--serve: latest, latest:N, all or specific:V1,V2,...");
DEFINE_bool(enable_batching, true, "--serve: run concurrent requests as one batch");
DEFINE_int32(max_batch_size, 32, "--serve: examples per batch at most");
DEFINE_int64(batch_timeout_micros, 1000, "--serve: how long a batch waits to fill");
DEFINE_int32(intra_op_threads, 1,
             "--serve: threads of one forward pass, out of --threads (0: all of them)");
DEFINE_string(bearer_token_file, "",
              "--serve: a file holding the token every request must bear "
              "(Authorization: Bearer ...); empty: none");
DEFINE_string(serve_tls_cert, "",
              "--serve: a PEM file with the server's certificate (chain): REST and gRPC over "
              "TLS, with --serve_tls_key (as the cluster's CADRE_TLS_CERT and CADRE_TLS_KEY)");
DEFINE_string(serve_tls_key, "", "--serve: the PEM file of that certificate's private key");

namespace {

using namespace cadre;

EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       const Params& params) {
  Tensor logits = examples::model_logits(params.text("model"), features.at("image"));
  if (mode == ModeKeys::kPredict) {
    // serving_default takes the image and returns every prediction (README, CONTRACTS);
    // "classification" answers TensorFlow Serving's Classify (:classify) with a tf.Example
    // per image (feature "image", 784 floats), labelled "0".."9" as a TensorFlow canned
    // classifier without a label vocabulary labels them.
    return EstimatorSpec::predict(
        {{"class", argmax(logits, 1)}, {"probabilities", softmax(logits)}, {"logits", logits}},
        {{"serving_default", {"class", "logits", "probabilities"}},
         {"classification",
          ExportOutput::classification("probabilities", ExportOutput::class_ids(10))}});
  }
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  if (mode == ModeKeys::kEval) {
    return EstimatorSpec::eval(loss, {{"accuracy", nn::metrics::accuracy(labels, logits)}});
  }
  return EstimatorSpec::train(loss, nn::optimizers::adam(params.number("learning_rate")));
}

// Raw bytes through shuffle and batch, scaled once per batch (the fastest order,
// docs/BENCHMARKS.md#input-pipeline; the batches are the same as scaling first).
Dataset train_input_fn(const InputContext& context) {
  return io::fashion_mnist(FLAGS_data_dir, io::Split::kTrain, io::ImageFormat::kRawBytes)
      .shard(context.num_input_pipelines, context.input_pipeline_id)
      .shuffle(10'000, FLAGS_seed)
      .repeat()
      .batch(context.per_replica_batch_size(FLAGS_batch_size), /*drop_remainder=*/true)
      .map(io::scale_pixels_fn())
      .prefetch();
}

Dataset eval_input_fn(const InputContext& context) {
  return io::fashion_mnist(FLAGS_data_dir, io::Split::kTest, io::ImageFormat::kRawBytes)
      .batch(1000)
      .map(io::scale_pixels_fn())
      .prefetch();
}

// "FIRST,LAST" of --profile_trace_steps; RunConfig checks that FIRST < LAST.
std::optional<std::pair<int64_t, int64_t>> trace_window(const std::string& flag) {
  if (flag.empty()) return std::nullopt;
  long long first = 0, last = 0;
  char extra = 0;
  if (std::sscanf(flag.c_str(), "%lld,%lld%c", &first, &last, &extra) != 2) {
    throw InvalidArgumentError("--profile_trace_steps='" + flag +
                               "' is invalid; expected FIRST,LAST such as 100,110");
  }
  return std::pair<int64_t, int64_t>{first, last};
}

// --serve: the exported versions behind TensorFlow Serving's APIs until SIGTERM.
int serve_exports() {
  examples::check_model_name(FLAGS_model);
  ServingOptions options;
  options.export_base = FLAGS_serve;
  options.model_name = FLAGS_model_name;
  options.host = FLAGS_serve_host;
  options.rest_port = FLAGS_rest_port;
  options.grpc_port = FLAGS_grpc_port;
  options.version_policy = VersionPolicy::parse(FLAGS_model_version_policy);
  options.batching.enabled = FLAGS_enable_batching;
  options.batching.max_batch_size = FLAGS_max_batch_size;
  options.batching.batch_timeout_micros = FLAGS_batch_timeout_micros;
  options.intra_op_threads = FLAGS_intra_op_threads;
  if (!FLAGS_bearer_token_file.empty()) {
    std::string token = posix_env()->read_file(FLAGS_bearer_token_file);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
      token.pop_back();
    examples::check_flag(!token.empty(), "bearer_token_file", FLAGS_bearer_token_file,
                         "a file holding a token");
    options.bearer_token = token;
  }
  options.tls_cert_file = FLAGS_serve_tls_cert;
  options.tls_key_file = FLAGS_serve_tls_key;
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);
  serve(model_fn, options, Params{{"model", FLAGS_model}});
  return 0;
}

// --elastic and the heartbeats, checked before the strategy joins anyone.
MultiWorkerOptions multi_worker_options() {
  examples::check_flag(!FLAGS_elastic || FLAGS_strategy == "multi_worker_mirrored", "elastic",
                       "true", "with --strategy=multi_worker_mirrored");
  examples::check_flag(!FLAGS_elastic || !FLAGS_deterministic, "elastic", "true",
                       "without --deterministic (its shards are split over a fixed set)");
  examples::check_flag(FLAGS_heartbeat_timeout_secs > 0, "heartbeat_timeout_secs",
                       FLAGS_heartbeat_timeout_secs, "a positive number of seconds");
  MultiWorkerOptions options;
  options.coordination.elastic = FLAGS_elastic;
  options.coordination.heartbeat_timeout_seconds = FLAGS_heartbeat_timeout_secs;
  options.coordination.heartbeat_interval_seconds = std::min(1.0, FLAGS_heartbeat_timeout_secs / 4);
  return options;
}

int run() {
  if (!FLAGS_serve.empty()) return serve_exports();
  if (FLAGS_model_dir.empty()) throw InvalidArgumentError("--model_dir is required");
  examples::check_model_name(FLAGS_model);
  RunConfig config = RunConfig::from_environment();  // TF_CONFIG: the task's role
  std::shared_ptr<Strategy> strategy =
      strategy_from_flags(FLAGS_strategy, FLAGS_devices,
                          config.cluster ? &*config.cluster : nullptr, {}, multi_worker_options());
  examples::check_flag(FLAGS_max_steps > 0, "max_steps", FLAGS_max_steps, "a positive step");
  examples::check_flag(FLAGS_batch_size > 0, "batch_size", FLAGS_batch_size,
                       "a positive number of examples");
  examples::check_flag(FLAGS_save_checkpoints_steps > 0, "save_checkpoints_steps",
                       FLAGS_save_checkpoints_steps, "a positive number of steps");
  examples::check_flag(FLAGS_log_step_count_steps > 0, "log_step_count_steps",
                       FLAGS_log_step_count_steps, "a positive number of steps");
  examples::check_flag(FLAGS_keep_checkpoint_max >= 0, "keep_checkpoint_max",
                       FLAGS_keep_checkpoint_max, "0 (keep every checkpoint) or more");
  examples::check_flag(FLAGS_steps_per_unit > 0, "steps_per_unit", FLAGS_steps_per_unit,
                       "a positive number of steps");
  examples::check_flag(FLAGS_eval_steps >= 0, "eval_steps", FLAGS_eval_steps,
                       "0 (the whole test set) or more");
  examples::check_flag(FLAGS_threads >= 0, "threads", FLAGS_threads, "0 (all cores) or more");
  examples::check_flag(FLAGS_learning_rate > 0 && std::isfinite(FLAGS_learning_rate),
                       "learning_rate", FLAGS_learning_rate, "a positive number");
  if (FLAGS_batch_size % strategy->num_replicas_in_sync() != 0) {
    throw InvalidArgumentError("--batch_size=" + std::to_string(FLAGS_batch_size) +
                               " does not divide over the " +
                               std::to_string(strategy->num_replicas_in_sync()) +
                               " replicas of --strategy=" + FLAGS_strategy);
  }
  examples::check_flag(FLAGS_input_shards >= 0, "input_shards", FLAGS_input_shards,
                       "0 (one per worker) or more");
  examples::check_flag(!FLAGS_deterministic || FLAGS_input_shards > 0, "deterministic", "true",
                       "with --input_shards (e.g. 8): the shards fix each step's rows");
  if (FLAGS_input_shards > 0 && FLAGS_batch_size % FLAGS_input_shards != 0) {
    throw InvalidArgumentError(
        "--batch_size=" + std::to_string(FLAGS_batch_size) +
        " does not divide over --input_shards=" + std::to_string(FLAGS_input_shards) +
        ": each step takes an equal share of every shard");
  }
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);

  config.model_dir = FLAGS_model_dir;
  config.tf_random_seed = FLAGS_seed;
  config.save_checkpoints_steps = FLAGS_save_checkpoints_steps;
  config.keep_checkpoint_max = FLAGS_keep_checkpoint_max;
  config.log_step_count_steps = FLAGS_log_step_count_steps;
  config.input_shards = FLAGS_input_shards;
  config.deterministic = FLAGS_deterministic;
  config.steps_per_unit = FLAGS_steps_per_unit;
  config.train_distribute = strategy;
  config.profile_every_n_steps = FLAGS_profile_every_n_steps;
  config.profile_trace_steps = trace_window(FLAGS_profile_trace_steps);
  if (strategy->num_workers() == 1) config.eval_distribute = strategy;
  Params params{{"model", FLAGS_model}, {"learning_rate", FLAGS_learning_rate}};
  Estimator estimator(model_fn, config, params);

  EvalSpec eval_spec(eval_input_fn, FLAGS_eval_steps);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;  // evaluate every checkpoint, as the contract's evaluator does
  if (FLAGS_export) {
    Tensor example = Tensor::zeros(Shape{1, 784});  // one flattened 28x28 image, both models
    eval_spec.exporters.push_back(
        std::make_shared<LatestExporter>("latest", Features{{"image", example}}));
  }
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(train_input_fn, FLAGS_max_steps), eval_spec);
  const EvalResult& eval = result.final_eval;
  std::string line = std::string("{\"task\":\"") + (config.cluster ? config.task_type : "local") +
                     "\",\"model\":\"" + FLAGS_model + "\",\"global_step\":" +
                     std::to_string(static_cast<int64_t>(eval.at("global_step")));
  line += examples::metrics_json(eval);
  std::printf("%s}\n", line.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cadre::examples::program_main(
      argc, argv, "Trains and evaluates a Fashion-MNIST model with the Estimator", run);
}
