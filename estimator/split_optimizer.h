// An optimizer made of others, each updating the variables under its name prefix: a wide &
// deep model's Ftrl for linear/ and Adagrad for dnn/, as tf.estimator trains them, each
// with its own slots (<var>/Ftrl/accumulator, <var>/Adagrad/accumulator) and step counter.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cadre/nn/optimizer.h"

namespace cadre::estimator_internal {

class SplitOptimizer final : public nn::Optimizer {
 public:
  using Part = std::pair<std::string, std::shared_ptr<nn::Optimizer>>;  // prefix, optimizer
  // Named, scheduled and counted as the last part, so that the learning rate a summary
  // shows and iterations() are that part's.
  explicit SplitOptimizer(std::vector<Part> parts);

  // Every part takes a step, with the gradients of its variables (maybe none, as
  // TensorFlow's optimizers of a model step together); a variable under no prefix is an
  // InvalidArgumentError.
  void apply_gradients(std::vector<Gradient> gradients,
                       const std::vector<nn::Variable*>& variables) override;
  // Kind "split", each part's config with its prefix: parameter servers apply the parts one
  // at a time.
  nn::OptimizerConfig config() const override;
  // Each part builds for its variables.
  void build(const std::vector<nn::Variable*>& variables) const override;

 protected:
  std::vector<SlotSpec> slot_specs() const override { return {}; }
  // Never called: apply_gradients hands every update to a part.
  void apply_dense(std::span<Tensor> vars, std::span<const Tensor> grads,
                   std::vector<std::vector<Tensor>>& slots, double lr, int64_t step) override;

 private:
  std::vector<Part> parts_;
};

}  // namespace cadre::estimator_internal
