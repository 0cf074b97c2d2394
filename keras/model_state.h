// What a Model holds: its graph of layer calls once built, and what compile resolved.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cadre/io/dataset.h"
#include "cadre/keras/model.h"
#include "keras/layer_impl.h"

namespace cadre::keras {

struct Model::State {
  std::string name;
  bool sequential = false;
  std::vector<Layer> stack;  // a Sequential's layers, its InputLayer excluded
  std::optional<std::pair<internal::Dims, InputOptions>> sequential_input;

  // The graph, once built: inputs, the layer calls in topological order, the output, and
  // each layer once in call order.
  std::vector<std::shared_ptr<internal::Node>> inputs;
  std::vector<std::shared_ptr<internal::Node>> order;
  std::shared_ptr<internal::Node> output;
  std::vector<std::shared_ptr<internal::LayerImpl>> layers;

  std::shared_ptr<const Strategy> scope_strategy;  // the StrategyScope at construction

  bool compiled = false;
  std::optional<Loss> loss;
  std::vector<Metric> metrics;
  RunConfig config;
  bool explicit_model_dir = false;
  // Whether this process gave the model its weights (a fit, load_model): a checkpoint in
  // model_dir is then its own, which the next fit resumes without a word.
  bool weights_from_this_process = false;
  // The model_dirs compile made for a model given none (one per compile): removed with the
  // state, as the in-memory model they stand for goes with it (Model::save keeps one).
  std::vector<std::string> temporary_model_dirs;

  State() = default;
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // The optimizer model_fn returns; replaced between epochs by set_learning_rate.
  std::shared_ptr<nn::Optimizer> optimizer() const {
    std::lock_guard<std::mutex> lock(optimizer_mutex);
    return optimizer_;
  }
  void set_optimizer(std::shared_ptr<nn::Optimizer> optimizer) {
    std::lock_guard<std::mutex> lock(optimizer_mutex);
    optimizer_ = std::move(optimizer);
  }

  bool built() const { return output != nullptr; }

 private:
  mutable std::mutex optimizer_mutex;
  std::shared_ptr<nn::Optimizer> optimizer_;
};

namespace internal {

// Builds a Sequential that has no input yet from the first element of `dataset` (its only
// feature, or the one the InputLayer names); FailedPreconditionError when there is nothing
// to build from.
void ensure_built(Model::State& state, const io::Dataset* dataset);
// The model on one batch: its output, and in *logits what entered a final softmax or
// sigmoid (undefined otherwise).
Tensor forward(const Model::State& state, const io::Features& features, bool training,
               Tensor* logits);
// An input_fn for the Estimator from a Dataset of global batches: the Dataset as it is on
// one replica, else re-batched to the replica's share of the global batch (keras/fit.cc).
InputFn per_replica_input(io::Dataset dataset);

}  // namespace internal
}  // namespace cadre::keras
