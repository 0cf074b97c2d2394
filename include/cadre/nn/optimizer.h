// Optimizers. An Optimizer object holds only its hyperparameters: its step counter and its
// slot variables live in the current VariableStore (slots named after their variable,
// "hidden1/kernel/Adam/m"), so checkpoints hold them, strategies make them with their own
// creator, and model code may build a fresh optimizer every step.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/nn/schedules.h"
#include "cadre/nn/variable.h"

namespace cadre {
class GradientTape;
}

namespace cadre::nn {

struct OptimizerConfig;
class ClaimedCopies;  // internal: what a checkpoint's deferred copy leaves to an update

struct OptimizerOptions {
  double global_clipnorm = 0;  // > 0: clip all gradients together by this global norm
  double clipnorm = 0;         // > 0: clip each gradient by its own norm
  double clipvalue = 0;        // > 0: clip each element to [-clipvalue, clipvalue]
};

class Optimizer {
 public:
  Optimizer(std::string name, LearningRate learning_rate, OptimizerOptions options);
  virtual ~Optimizer() = default;

  const std::string& name() const { return name_; }
  const LearningRate& learning_rate() const { return learning_rate_; }
  const OptimizerOptions& options() const { return options_; }

  // Steps applied so far, from "<name>/iterations" in the current store (0 before the first).
  int64_t iterations() const;
  // The learning rate the next step will use.
  double current_learning_rate() const;

  // One update of each variable by its gradient (undefined gradients are skipped), after
  // clipping per options(); then iterations() grows by one. Gradients must match their
  // variables in shape, dtype and device. Virtual so that an optimizer may hand parts of
  // the variables to others (the two of a wide & deep model).
  virtual void apply_gradients(std::vector<Gradient> gradients,
                               const std::vector<Variable*>& variables);
  // Makes the slots of `variables` and the step counter in the current store now, as the
  // first update would (Keras' Optimizer.build): for processes that compare their variables
  // before their first update (an elastic group's workers).
  virtual void build(const std::vector<Variable*>& variables) const;
  // Gradients of `loss` on `tape` with respect to `variables` (default: the current store's
  // trainable variables), then apply_gradients.
  void minimize(GradientTape& tape, const Tensor& loss, std::vector<Variable*> variables = {});

  // The parts of apply_gradients, for code that applies updates elsewhere (parameter
  // servers): clipping per options(), in place; and one update of each variable at step
  // `step` (1 for the first) with slots from the current store, without clipping and without
  // advancing iterations(). The caller serialises updates of the same variable.
  void clip_gradients(std::vector<Gradient>& gradients) const;
  void apply_updates(const std::vector<Gradient>& gradients,
                     const std::vector<Variable*>& variables, int64_t step);
  // The specs of var's slots and of the step counter, as the current store would create them.
  std::vector<VariableSpec> slot_variable_specs(const Variable& var) const;
  VariableSpec iterations_spec() const;
  // The optimizer as data (optimizer_config.h), for parameter servers. The built-in
  // optimizers have one; the default throws UnimplementedError naming the need.
  virtual OptimizerConfig config() const;

 protected:
  struct SlotSpec {
    std::string name;
    double initial_value = 0;
  };
  // The slots this optimizer keeps per variable (given its hyperparameters).
  virtual std::vector<SlotSpec> slot_specs() const = 0;
  // Dense update of vars[i] by grads[i] with slots[k][i] (slot k of variable i), at
  // learning rate `lr` on step `step` (1 for the first update).
  virtual void apply_dense(std::span<Tensor> vars, std::span<const Tensor> grads,
                           std::vector<std::vector<Tensor>>& slots, double lr, int64_t step) = 0;
  // The same update while a checkpoint still needs the old values of some vars and slots:
  // each of the claimed copies is made before its tensor is overwritten. The default makes
  // them all, reports them done, then calls apply_dense (which may write variables any way
  // it likes), which serves any optimizer; the built-in ones override it to copy chunk by
  // chunk inside their update pass (ClaimedCopies is internal to Cadre).
  virtual void apply_dense_copying_out(std::span<Tensor> vars, std::span<const Tensor> grads,
                                       std::vector<std::vector<Tensor>>& slots, double lr,
                                       int64_t step, ClaimedCopies& claimed);
  // Sparse update of one variable; the default applies the densified gradient, which is
  // what TensorFlow 2 does for optimizers that decay every slot row each step.
  virtual void apply_sparse(Tensor& var, const IndexedSlices& grad, std::vector<Tensor>& slots,
                            double lr, int64_t step);

 private:
  Variable& slot(const Variable& var, const SlotSpec& spec) const;
  Variable& iterations_variable() const;

  std::string name_;
  LearningRate learning_rate_;
  OptimizerOptions options_;
};

// Sums the values of repeated indices: unique indices (in first-seen order) and their
// summed rows.
IndexedSlices deduplicate(const IndexedSlices& slices);

}  // namespace cadre::nn
