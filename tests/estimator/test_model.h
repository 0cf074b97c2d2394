// A small classifier and its data for the estimator tests: 8 features, 3 classes given by a
// fixed linear rule, a hidden layer with dropout (so that resuming must restore the random
// generator), Adam (so that it must restore the slots), shuffled input (so that it must
// restore the input position).
#pragma once

#include <cmath>
#include <vector>

#include "cadre/estimator/estimator.h"
#include "cadre/io/dataset.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/reduce.h"

namespace cadre::testing {

inline constexpr int64_t kExamples = 512;
inline constexpr int64_t kFeatures = 8;

// x [n, 8] in [-1, 1] from a fixed sequence; label = argmax of x·W for a fixed W.
inline std::pair<Tensor, Tensor> classification_data(int64_t n, int offset = 0) {
  std::vector<float> x(static_cast<size_t>(n * kFeatures));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float score[3] = {0, 0, 0};
    for (int64_t j = 0; j < kFeatures; ++j) {
      float v = static_cast<float>(std::sin(0.7 * (i + offset) * (j + 1) + j));
      x[i * kFeatures + j] = v;
      for (int c = 0; c < 3; ++c)
        score[c] += v * static_cast<float>(std::cos(1.3 * (c + 1) * (j + 2)));
    }
    y[i] = std::max_element(score, score + 3) - score;
  }
  return {Tensor::from_vector(x, Shape{n, kFeatures}), Tensor::from_vector(y)};
}

inline EstimatorSpec classifier_fn(const Features& features, const Tensor& labels, ModeKeys mode,
                                   const Params& params) {
  bool training = mode == ModeKeys::kTrain;
  Tensor x = features.at("x");
  if (params.number("embedding", 0) > 0) {
    // A token per example from its first feature (32 of them), looked up in a table whose
    // gradient is sparse rows.
    Tensor ids = cast(clip_by_value(floor((x.slice(1, 0, 1) + 1.0) * 16.0), 0, 31), DType::kInt64);
    x = concat({x, nn::embedding("token", ids.reshape({-1}), 32, 4)}, 1);
  }
  x = nn::dense("hidden", x, 16, nn::relu);
  if (int64_t wide = static_cast<int64_t>(params.number("wide", 0)); wide > 0) {
    // A [wide, wide] kernel, which a sharded checkpoint splits by rows among the workers.
    x = nn::dense("wide_in", x, wide, nn::relu);
    x = nn::dense("wide", x, wide, nn::relu);
  }
  x = nn::dropout(x, params.number("dropout", 0.1), training);
  Tensor logits = nn::dense("logits", x, 3);
  if (mode == ModeKeys::kPredict) {
    return EstimatorSpec::predict(
        {{"class", argmax(logits, 1)}, {"probabilities", softmax(logits)}});
  }
  Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
  if (mode == ModeKeys::kEval) {
    return EstimatorSpec::eval(loss, {{"accuracy", nn::metrics::accuracy(labels, logits)}});
  }
  return EstimatorSpec::train(loss, nn::optimizers::adam(params.number("learning_rate", 0.01)))
      .with_tensors({{"logits", logits}});
}

inline Dataset train_input(const InputContext& context) {
  auto [x, y] = classification_data(kExamples);
  return Dataset::from_tensor_slices(Features{{"x", x}}, y)
      .shuffle(64, /*seed=*/7)
      .repeat()
      .batch(16)
      .prefetch(2);
}

inline Dataset eval_input(const InputContext& context) {
  auto [x, y] = classification_data(256, /*offset=*/100000);
  return Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(64);
}

inline Dataset predict_input(const InputContext& context) {
  auto [x, y] = classification_data(20, /*offset=*/100000);
  return Dataset::from_tensor_slices(Features{{"x", x}}).batch(8);
}

// The loss and global step of every step, from a hook.
class LossRecorder : public Hook {
 public:
  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    losses.push_back(result.loss);
    steps.push_back(result.global_step);
  }
  std::vector<double> losses;
  std::vector<int64_t> steps;
};

inline RunConfig test_config(const std::string& model_dir, int64_t save_steps = 50) {
  RunConfig config;
  config.model_dir = model_dir;
  config.tf_random_seed = 42;
  config.save_checkpoints_steps = save_steps;
  config.log_step_count_steps = 1000;
  return config;
}

}  // namespace cadre::testing
