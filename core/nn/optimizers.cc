#include "cadre/nn/optimizers.h"

#include <cmath>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "core/kernels/optimizer.h"
#include "core/nn/deferred_copy.h"
#include "core/nn/optimizer_config.h"

namespace cadre::nn::optimizers {
namespace {

Device device_of(std::span<Tensor> vars) { return vars.front().device(); }

// The config fields every optimizer shares: its kind, learning rate and clipping.
OptimizerConfig base_config(const Optimizer& optimizer, std::string kind) {
  OptimizerConfig config;
  config.kind = std::move(kind);
  if (optimizer.learning_rate().is_schedule()) {
    config.schedule = optimizer.learning_rate().schedule()->config();
  } else {
    config.numbers["learning_rate"] = optimizer.learning_rate().at(0);
  }
  config.options = optimizer.options();
  return config;
}

// The built-in optimizers: one fused kernel call updates every dense variable, and makes the
// checkpoint copies it is given (kernels::*Params::copy_out) as it goes.
class FusedOptimizer : public Optimizer {
 public:
  using Optimizer::Optimizer;

 protected:
  void apply_dense(std::span<Tensor> vars, std::span<const Tensor> grads,
                   std::vector<std::vector<Tensor>>& slots, double lr, int64_t step) final {
    ClaimedCopies none;
    apply_dense_copying_out(vars, grads, slots, lr, step, none);
  }
};

class Sgd : public FusedOptimizer {
 public:
  Sgd(LearningRate lr, double momentum, bool nesterov, OptimizerOptions options)
      : FusedOptimizer("SGD", std::move(lr), options), momentum_(momentum), nesterov_(nesterov) {}
  OptimizerConfig config() const override {
    OptimizerConfig c = base_config(*this, "sgd");
    c.numbers["momentum"] = momentum_;
    c.numbers["nesterov"] = nesterov_ ? 1 : 0;
    return c;
  }

 protected:
  std::vector<SlotSpec> slot_specs() const override {
    if (momentum_ == 0) return {};
    return {{"momentum", 0.0}};
  }
  void apply_dense_copying_out(std::span<Tensor> vars, std::span<const Tensor> grads,
                               std::vector<std::vector<Tensor>>& slots, double lr, int64_t,
                               ClaimedCopies& claimed) override {
    kernels::SgdParams p{lr, momentum_, nesterov_, claimed.copies()};
    std::span<Tensor> momenta = momentum_ == 0 ? std::span<Tensor>() : std::span<Tensor>(slots[0]);
    kernels::sgd_update.call(device_of(vars), vars, grads, momenta, p);
  }
  void apply_sparse(Tensor& var, const IndexedSlices& grad, std::vector<Tensor>& slots, double lr,
                    int64_t step) override {
    if (momentum_ != 0) return Optimizer::apply_sparse(var, grad, slots, lr, step);
    scatter_add_inplace(var, grad.indices, mul(grad.values, scalar_like(grad.values, -lr)));
  }

 private:
  double momentum_;
  bool nesterov_;
};

class Adam : public FusedOptimizer {
 public:
  Adam(LearningRate lr, double beta1, double beta2, double epsilon, OptimizerOptions options)
      : FusedOptimizer("Adam", std::move(lr), options),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon) {}
  OptimizerConfig config() const override {
    OptimizerConfig c = base_config(*this, "adam");
    c.numbers["beta1"] = beta1_;
    c.numbers["beta2"] = beta2_;
    c.numbers["epsilon"] = epsilon_;
    return c;
  }

 protected:
  std::vector<SlotSpec> slot_specs() const override { return {{"m", 0.0}, {"v", 0.0}}; }
  void apply_dense_copying_out(std::span<Tensor> vars, std::span<const Tensor> grads,
                               std::vector<std::vector<Tensor>>& slots, double lr, int64_t step,
                               ClaimedCopies& claimed) override {
    double t = static_cast<double>(step);
    double corrected = lr * std::sqrt(1 - std::pow(beta2_, t)) / (1 - std::pow(beta1_, t));
    kernels::AdamParams p{corrected, beta1_, beta2_, epsilon_, claimed.copies()};
    kernels::adam_update.call(device_of(vars), vars, grads, slots[0], slots[1], p);
  }

 private:
  double beta1_, beta2_, epsilon_;
};

class Adagrad : public FusedOptimizer {
 public:
  Adagrad(LearningRate lr, double initial, double epsilon, OptimizerOptions options)
      : FusedOptimizer("Adagrad", std::move(lr), options), initial_(initial), epsilon_(epsilon) {}
  OptimizerConfig config() const override {
    OptimizerConfig c = base_config(*this, "adagrad");
    c.numbers["initial_accumulator_value"] = initial_;
    c.numbers["epsilon"] = epsilon_;
    return c;
  }

 protected:
  std::vector<SlotSpec> slot_specs() const override { return {{"accumulator", initial_}}; }
  void apply_dense_copying_out(std::span<Tensor> vars, std::span<const Tensor> grads,
                               std::vector<std::vector<Tensor>>& slots, double lr, int64_t,
                               ClaimedCopies& claimed) override {
    kernels::AdagradParams p{lr, epsilon_, claimed.copies()};
    kernels::adagrad_update.call(device_of(vars), vars, grads, slots[0], p);
  }
  // Only the touched rows: accumulator rows grow by g^2, then w -= lr g / (sqrt(acc) + eps).
  void apply_sparse(Tensor& var, const IndexedSlices& grad, std::vector<Tensor>& slots, double lr,
                    int64_t) override {
    IndexedSlices g = deduplicate(grad);
    Tensor& accum = slots[0];
    scatter_add_inplace(accum, g.indices, square(g.values));
    Tensor rows = gather(accum, g.indices, 0);
    Tensor step = div(mul(g.values, scalar_like(g.values, -lr)),
                      add(sqrt(rows), scalar_like(rows, epsilon_)));
    scatter_add_inplace(var, g.indices, step);
  }

 private:
  double initial_, epsilon_;
};

class RmsProp : public FusedOptimizer {
 public:
  RmsProp(LearningRate lr, double rho, double momentum, double epsilon, bool centered,
          OptimizerOptions options)
      : FusedOptimizer("RMSprop", std::move(lr), options),
        rho_(rho),
        momentum_(momentum),
        epsilon_(epsilon),
        centered_(centered) {}
  OptimizerConfig config() const override {
    OptimizerConfig c = base_config(*this, "rmsprop");
    c.numbers["rho"] = rho_;
    c.numbers["momentum"] = momentum_;
    c.numbers["epsilon"] = epsilon_;
    c.numbers["centered"] = centered_ ? 1 : 0;
    return c;
  }

 protected:
  std::vector<SlotSpec> slot_specs() const override {
    std::vector<SlotSpec> specs{{"rms", 0.0}};
    if (momentum_ > 0) specs.push_back({"momentum", 0.0});
    if (centered_) specs.push_back({"mg", 0.0});
    return specs;
  }
  void apply_dense_copying_out(std::span<Tensor> vars, std::span<const Tensor> grads,
                               std::vector<std::vector<Tensor>>& slots, double lr, int64_t,
                               ClaimedCopies& claimed) override {
    kernels::RmsPropParams p{lr, rho_, momentum_, epsilon_, centered_, claimed.copies()};
    size_t next = 1;
    std::span<Tensor> mom = momentum_ > 0 ? std::span<Tensor>(slots[next++]) : std::span<Tensor>();
    std::span<Tensor> mg = centered_ ? std::span<Tensor>(slots[next]) : std::span<Tensor>();
    kernels::rmsprop_update.call(device_of(vars), vars, grads, slots[0], mom, mg, p);
  }

 private:
  double rho_, momentum_, epsilon_;
  bool centered_;
};

void check_rate(const char* name, const LearningRate& lr) {
  if (!lr.is_schedule() && !(lr.at(0) > 0)) {
    throw InvalidArgumentError(str_cat(name, ": learning rate must be positive, got ", lr.at(0)));
  }
}

}  // namespace

std::shared_ptr<Optimizer> sgd(LearningRate learning_rate, double momentum, bool nesterov,
                               OptimizerOptions options) {
  check_rate("sgd", learning_rate);
  if (momentum < 0 || momentum > 1) {
    throw InvalidArgumentError(str_cat("sgd: momentum must be in [0, 1], got ", momentum));
  }
  return std::make_shared<Sgd>(std::move(learning_rate), momentum, nesterov, options);
}

std::shared_ptr<Optimizer> adam(LearningRate learning_rate, double beta1, double beta2,
                                double epsilon, OptimizerOptions options) {
  check_rate("adam", learning_rate);
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1) {
    throw InvalidArgumentError(
        str_cat("adam: beta1 and beta2 must be in [0, 1), got ", beta1, " and ", beta2));
  }
  return std::make_shared<Adam>(std::move(learning_rate), beta1, beta2, epsilon, options);
}

std::shared_ptr<Optimizer> adagrad(LearningRate learning_rate, double initial_accumulator_value,
                                   double epsilon, OptimizerOptions options) {
  check_rate("adagrad", learning_rate);
  if (initial_accumulator_value < 0) {
    throw InvalidArgumentError(str_cat("adagrad: initial_accumulator_value must be >= 0, got ",
                                       initial_accumulator_value));
  }
  return std::make_shared<Adagrad>(std::move(learning_rate), initial_accumulator_value, epsilon,
                                   options);
}

std::shared_ptr<Optimizer> rmsprop(LearningRate learning_rate, double rho, double momentum,
                                   double epsilon, bool centered, OptimizerOptions options) {
  check_rate("rmsprop", learning_rate);
  return std::make_shared<RmsProp>(std::move(learning_rate), rho, momentum, epsilon, centered,
                                   options);
}

}  // namespace cadre::nn::optimizers
