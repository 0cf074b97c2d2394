// The smallest Estimator program, after TensorFlow's distributed-training guide: one Dense
// unit learns y = 1 from x = 1 with mean squared error and SGD at 0.2.
//
//   linear_regression --model_dir=runs/linear
//   {"task":"local","global_step":100,"loss":0,"prediction":1}
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "cadre/base/errors.h"
#include "cadre/estimator/estimator.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/nn/nn.h"
#include "examples/program_main.h"

DEFINE_string(model_dir, "", "checkpoints and summaries (required)");
DEFINE_int64(max_steps, 100, "global step to stop at");
DEFINE_uint64(seed, 42, "global seed");

namespace {

using namespace cadre;

EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       const Params& params) {
  Tensor prediction = nn::dense("dense", features.at("x"), 1);
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"y", prediction}});
  Tensor loss = nn::mean_squared_error(labels, prediction);
  if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
  return EstimatorSpec::train(loss, nn::optimizers::sgd(0.2));
}

// Batches of 10 copies of (x = 1, y = 1), repeated.
Dataset input_fn(const InputContext& context) {
  return Dataset::from_tensors(Element(Features{{"x", Tensor::ones({1})}}, Tensor::ones({1})))
      .repeat()
      .batch(context.per_replica_batch_size(10));
}

Dataset eval_input_fn(const InputContext& context) { return input_fn(context).take(1); }

int run() {
  if (FLAGS_model_dir.empty()) throw InvalidArgumentError("--model_dir is required");
  examples::check_flag(FLAGS_max_steps > 0, "max_steps", FLAGS_max_steps, "a positive step");
  RunConfig config;
  config.model_dir = FLAGS_model_dir;
  config.tf_random_seed = FLAGS_seed;
  config.save_checkpoints_steps = 50;
  Estimator estimator(model_fn, config);
  EvalSpec eval_spec(eval_input_fn, /*steps=*/1);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  TrainAndEvaluateResult result =
      train_and_evaluate(estimator, TrainSpec(input_fn, FLAGS_max_steps), eval_spec);
  Predictions predictions = estimator.predict(eval_input_fn);
  float y = predictions.next()->at("y").item<float>();
  std::printf("{\"task\":\"local\",\"global_step\":%lld,\"loss\":%.6g,\"prediction\":%.6g}\n",
              static_cast<long long>(result.final_eval.at("global_step")),
              result.final_eval.at("loss"), y);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cadre::examples::program_main(
      argc, argv, "Fits y = 1 with one Dense unit (TensorFlow's distribution guide)", run);
}
