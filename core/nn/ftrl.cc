// FTRL-Proximal (McMahan et al. 2013) as tf.keras's Ftrl computes it (TensorFlow's
// ApplyFtrlV2 kernel, linear not multiplied by the learning rate), so that a linear model's
// state from TensorFlow (training/Ftrl/<variable>/accumulator and /linear) goes on training
// here unchanged. Written with ops rather than a fused kernel: it runs on any device, and
// wide models' updates are dominated by the rows a sparse gradient touches.
#include "cadre/base/errors.h"
#include "cadre/nn/optimizers.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"

namespace cadre::nn::optimizers {
namespace {

class Ftrl : public Optimizer {
 public:
  Ftrl(LearningRate lr, FtrlOptions o, OptimizerOptions options)
      : Optimizer("Ftrl", std::move(lr), options), o_(o) {}

  OptimizerConfig config() const override {
    OptimizerConfig c;
    c.kind = "ftrl";
    if (learning_rate().is_schedule()) {
      c.schedule = learning_rate().schedule()->config();
    } else {
      c.numbers["learning_rate"] = learning_rate().at(0);
    }
    c.options = options();
    c.numbers["learning_rate_power"] = o_.learning_rate_power;
    c.numbers["initial_accumulator_value"] = o_.initial_accumulator_value;
    c.numbers["l1_regularization_strength"] = o_.l1;
    c.numbers["l2_regularization_strength"] = o_.l2;
    c.numbers["l2_shrinkage_regularization_strength"] = o_.l2_shrinkage;
    c.numbers["beta"] = o_.beta;
    return c;
  }

 protected:
  std::vector<SlotSpec> slot_specs() const override {
    return {{"accumulator", o_.initial_accumulator_value}, {"linear", 0.0}};
  }

  void apply_dense(std::span<Tensor> vars, std::span<const Tensor> grads,
                   std::vector<std::vector<Tensor>>& slots, double lr, int64_t) override {
    for (size_t i = 0; i < vars.size(); ++i) {
      if (!grads[i].defined()) continue;
      Tensor w = vars[i], accum = slots[0][i], linear = slots[1][i];
      auto [new_w, new_accum, new_linear] = update(w, grads[i], accum, linear, lr);
      vars[i].assign(new_w);
      slots[0][i].assign(new_accum);
      slots[1][i].assign(new_linear);
    }
  }

  // The rows a gradient touches, each once (duplicates summed, as tf.keras does).
  void apply_sparse(Tensor& var, const IndexedSlices& grad, std::vector<Tensor>& slots, double lr,
                    int64_t) override {
    IndexedSlices g = deduplicate(grad);
    Tensor w = gather(var, g.indices, 0);
    Tensor accum = gather(slots[0], g.indices, 0);
    Tensor linear = gather(slots[1], g.indices, 0);
    auto [new_w, new_accum, new_linear] = update(w, g.values, accum, linear, lr);
    scatter_add_inplace(var, g.indices, sub(new_w, w));
    scatter_add_inplace(slots[0], g.indices, sub(new_accum, accum));
    scatter_add_inplace(slots[1], g.indices, sub(new_linear, linear));
  }

 private:
  struct State {
    Tensor w, accum, linear;
  };
  // accum' = accum + g^2; linear' = linear + g + 2 l2_shrinkage w - (accum'^-p - accum^-p) / lr w;
  // w' = (sign(linear') l1 - linear') / (accum'^-p / lr + 2 (l2 + beta / (2 lr))) where
  // |linear'| > l1, else 0 (p = learning_rate_power).
  State update(const Tensor& w, const Tensor& g, const Tensor& accum, const Tensor& linear,
               double lr) const {
    auto power = [&](const Tensor& x) {
      return o_.learning_rate_power == -0.5 ? sqrt(x)
                                            : pow(x, scalar_like(x, -o_.learning_rate_power));
    };
    Tensor shrunk = o_.l2_shrinkage == 0 ? g : add(g, mul(w, scalar_like(w, 2 * o_.l2_shrinkage)));
    Tensor new_accum = add(accum, square(g));
    Tensor sigma = div(sub(power(new_accum), power(accum)), scalar_like(w, lr));
    Tensor new_linear = sub(add(linear, shrunk), mul(sigma, w));
    double l2 = o_.l2 + o_.beta / (2 * lr);
    Tensor quadratic = add(div(power(new_accum), scalar_like(w, lr)), scalar_like(w, 2 * l2));
    Tensor l1 = scalar_like(w, o_.l1);
    Tensor shrink = div(sub(mul(sign(new_linear), l1), new_linear), quadratic);
    Tensor new_w = where(greater(abs(new_linear), l1), shrink, scalar_like(w, 0));
    return {new_w, new_accum, new_linear};
  }

  FtrlOptions o_;
};

}  // namespace

std::shared_ptr<Optimizer> ftrl(LearningRate learning_rate, FtrlOptions ftrl,
                                OptimizerOptions options) {
  if (ftrl.learning_rate_power > 0) {
    throw InvalidArgumentError(
        str_cat("ftrl: learning_rate_power must be <= 0, got ", ftrl.learning_rate_power));
  }
  if (ftrl.initial_accumulator_value < 0 || ftrl.l1 < 0 || ftrl.l2 < 0 || ftrl.l2_shrinkage < 0 ||
      ftrl.beta < 0) {
    throw InvalidArgumentError(
        "ftrl: initial_accumulator_value and the regularization strengths must be >= 0");
  }
  return std::make_shared<Ftrl>(std::move(learning_rate), ftrl, options);
}

}  // namespace cadre::nn::optimizers
