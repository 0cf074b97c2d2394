// A user's first Estimator program, built against the installed package: README.md's
// "Write your first model" is this file.
#include <cadre/cadre.h>

#include <cstdio>

using namespace cadre;

// y = 2x + 1, learned by one Dense unit.
EstimatorSpec model_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                       const Params& params) {
  Tensor y = nn::dense("line", features.at("x"), 1);
  if (mode == ModeKeys::kPredict) return EstimatorSpec::predict({{"y", y}});
  Tensor loss = nn::mean_squared_error(labels, y);
  if (mode == ModeKeys::kEval) return EstimatorSpec::eval(loss);
  return EstimatorSpec::train(loss, nn::optimizers::sgd(params.number("learning_rate")));
}

Dataset input_fn(const InputContext& context) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3}, Shape{4, 1});
  return Dataset::from_tensor_slices(Features{{"x", x}}, x * 2.0 + 1.0).repeat().batch(4);
}

int main(int argc, char** argv) {
  RunConfig config;
  config.model_dir = argc > 1 ? argv[1] : "first_model";
  config.tf_random_seed = 1;
  Estimator estimator(model_fn, config, {{"learning_rate", 0.1}});
  estimator.train(input_fn, {.max_steps = 300});
  EvalResult result = estimator.evaluate(input_fn, {.steps = 1});
  std::printf("cadre %s: step %g, loss %g\n", CADRE_VERSION, result["global_step"], result["loss"]);
  if (result["loss"] >= 1e-4) return 1;

  // The README's "one line distributes it": two replicas on logical CPU devices resume the
  // one-device checkpoint (each replica's input_fn batches its share, here all 4 rows).
  config.train_distribute = MirroredStrategy::create({Device::cpu(0), Device::cpu(1)});
  Estimator mirrored(model_fn, config, {{"learning_rate", 0.1}});
  mirrored.train(input_fn, {.max_steps = 400});
  EvalResult after = mirrored.evaluate(input_fn, {.steps = 1});
  std::printf("mirrored on 2 replicas: step %g, loss %g\n", after["global_step"], after["loss"]);
  return after["global_step"] == 400 && after["loss"] < 1e-4 ? 0 : 1;
}
