// A click-through classifier over a large embedding table, trained with the Estimator
// (--strategy=parameter_server under TF_CONFIG, or any other strategy). Each example is
// --fields categorical ids hashed into a vocabulary of --vocab_size rows, drawn so that
// popular ids repeat (as real click logs do); whether it is clicked depends on hidden
// weights of its ids. The model sums the ids' embeddings and classifies them with a small
// MLP; Adagrad updates only the rows a batch touches.
//
// On parameter servers the table is sliced over the ps tasks, each step pulls only the rows
// its batch looks up and pushes only their gradients: each training task's last line
// reports the bytes it pushed and pulled per step beside the table's size.
//
//   cadre_launch --chief=1 --workers=1 --ps=2 --evaluator=1 --
//     embedding_classifier --model_dir=runs/clicks --strategy=parameter_server  (one line)
//   [chief:0] {"task":"chief","global_step":3000,"table_bytes":33554432,
//              "pushed_bytes_per_step":...,"pulled_bytes_per_step":...}
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "cadre/base/errors.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/dataset.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "cadre/strategies/strategy_from_flags.h"
#include "examples/program_main.h"
#include "examples/result_line.h"

DEFINE_string(model_dir, "", "checkpoints and summaries (required)");
DEFINE_string(strategy, "parameter_server",
              "one_device, mirrored, central_storage, multi_worker_mirrored, parameter_server");
DEFINE_string(devices, "", "devices, e.g. cpu:0 (default: all GPUs, else cpu:0)");
DEFINE_int64(vocab_size, 1 << 19, "rows of the embedding table");
DEFINE_int64(embedding_dim, 16, "columns of the embedding table");
DEFINE_int32(fields, 8, "categorical ids per example");
DEFINE_int64(examples, 400'000, "synthetic training examples (the test set is a fifth of it)");
DEFINE_int64(max_steps, 3000, "global step to stop at");
DEFINE_int64(batch_size, 256, "batch size per step");
DEFINE_double(learning_rate, 0.5, "Adagrad learning rate");
DEFINE_int64(save_checkpoints_steps, 1000, "checkpoint interval in steps");
DEFINE_int64(eval_steps, 0, "eval batches per checkpoint; 0 = the whole test set");
DEFINE_uint64(seed, 42, "global seed");
DEFINE_bool(restore_on_ps_tasks, true,
            "on resuming, each ps task reads its own rows of the table (false: the chief reads "
            "the table and sends them)");

namespace {

using namespace cadre;

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Examples `first` .. `first + count`: ids [count, fields] (popular ids are the small
// ones), and labels 1 when the ids' hidden weights (in [-1, 1]) sum above 0.
std::pair<Tensor, Tensor> clicks(int64_t first, int64_t count) {
  std::vector<int64_t> ids(static_cast<size_t>(count * FLAGS_fields));
  std::vector<int64_t> labels(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    double score = 0;
    for (int f = 0; f < FLAGS_fields; ++f) {
      uint64_t r = mix((first + e) * 131 + f + FLAGS_seed * 7919);
      double u = static_cast<double>(r >> 11) / 9007199254740992.0;
      int64_t id = static_cast<int64_t>(std::pow(u, 3.0) * static_cast<double>(FLAGS_vocab_size));
      ids[static_cast<size_t>(e * FLAGS_fields + f)] = id;
      score += static_cast<double>(mix(static_cast<uint64_t>(id)) % 2001) / 1000.0 - 1.0;
    }
    labels[static_cast<size_t>(e)] = score > 0 ? 1 : 0;
  }
  return {Tensor::from_vector(ids, Shape{count, FLAGS_fields}), Tensor::from_vector(labels)};
}

EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       const Params& params) {
  Tensor embedded = nn::embedding("ids", features.at("ids"), FLAGS_vocab_size, FLAGS_embedding_dim,
                                  nn::initializers::random_normal(0, 0.05));
  Tensor pooled = sum(embedded, {1});  // [batch, dim]
  Tensor hidden = nn::dense("hidden", pooled, 32, nn::relu);
  Tensor logits = nn::dense("logits", hidden, 2);
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"logits", logits}});
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  if (mode == ModeKeys::kEval) {
    return EstimatorSpec::eval(loss, {{"accuracy", nn::metrics::accuracy(labels, logits)}});
  }
  return EstimatorSpec::train(loss, nn::optimizers::adagrad(params.number("learning_rate")));
}

Dataset train_input_fn(const InputContext& context) {
  auto [ids, labels] = clicks(0, FLAGS_examples);
  return Dataset::from_tensor_slices(Features{{"ids", ids}}, labels)
      .shard(context.num_input_pipelines, context.input_pipeline_id)
      .shuffle(20'000, FLAGS_seed)
      .repeat()
      .batch(context.per_replica_batch_size(FLAGS_batch_size), /*drop_remainder=*/true)
      .prefetch();
}

Dataset eval_input_fn(const InputContext&) {
  auto [ids, labels] = clicks(FLAGS_examples, FLAGS_examples / 5);
  return Dataset::from_tensor_slices(Features{{"ids", ids}}, labels).batch(1000).prefetch();
}

// Counts this process's training steps.
class StepCount : public Hook {
 public:
  void after_run(Run&, const StepResult&, RunContext&) override { ++steps; }
  int64_t steps = 0;
};

int run() {
  if (FLAGS_model_dir.empty()) throw InvalidArgumentError("--model_dir is required");
  examples::check_flag(FLAGS_vocab_size > 0, "vocab_size", FLAGS_vocab_size, "a positive count");
  examples::check_flag(FLAGS_embedding_dim > 0, "embedding_dim", FLAGS_embedding_dim,
                       "a positive count");
  examples::check_flag(FLAGS_fields > 0, "fields", FLAGS_fields, "a positive count");
  examples::check_flag(FLAGS_examples >= 5, "examples", FLAGS_examples, "5 or more");
  examples::check_flag(FLAGS_batch_size > 0, "batch_size", FLAGS_batch_size, "a positive count");
  examples::check_flag(FLAGS_max_steps > 0, "max_steps", FLAGS_max_steps, "a positive step");
  examples::check_flag(FLAGS_save_checkpoints_steps > 0, "save_checkpoints_steps",
                       FLAGS_save_checkpoints_steps, "a positive number of steps");
  examples::check_flag(FLAGS_eval_steps >= 0, "eval_steps", FLAGS_eval_steps,
                       "0 (the whole test set) or more");
  examples::check_flag(FLAGS_learning_rate > 0, "learning_rate", FLAGS_learning_rate,
                       "a positive number");
  RunConfig config = RunConfig::from_environment();
  ParameterServerOptions ps_options;
  ps_options.restore_on_ps_tasks = FLAGS_restore_on_ps_tasks;
  std::shared_ptr<Strategy> strategy = strategy_from_flags(
      FLAGS_strategy, FLAGS_devices, config.cluster ? &*config.cluster : nullptr, ps_options);
  config.model_dir = FLAGS_model_dir;
  config.tf_random_seed = FLAGS_seed;
  config.save_checkpoints_steps = FLAGS_save_checkpoints_steps;
  config.train_distribute = strategy;
  Estimator estimator(model_fn, config, Params{{"learning_rate", FLAGS_learning_rate}});

  auto steps = std::make_shared<StepCount>();
  EvalSpec eval_spec(eval_input_fn, FLAGS_eval_steps);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(train_input_fn, FLAGS_max_steps, {steps}), eval_spec);
  std::string line = std::string("{\"task\":\"") + (config.cluster ? config.task_type : "local") +
                     "\",\"global_step\":" +
                     std::to_string(static_cast<int64_t>(result.final_eval.at("global_step")));
  if (std::optional<ParameterServerTraffic> traffic = parameter_server_traffic(*strategy);
      traffic && steps->steps > 0) {
    int64_t table = FLAGS_vocab_size * FLAGS_embedding_dim * 4;
    line += ",\"table_bytes\":" + std::to_string(table) +
            ",\"pushed_bytes_per_step\":" + std::to_string(traffic->bytes_pushed / steps->steps) +
            ",\"pulled_bytes_per_step\":" + std::to_string(traffic->bytes_pulled / steps->steps);
  }
  line += examples::metrics_json(result.final_eval);
  std::printf("%s}\n", line.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cadre::examples::program_main(
      argc, argv, "Trains a click classifier over a large embedding table", run);
}
