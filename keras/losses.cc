// Losses by Keras name and as objects.
#include "cadre/keras/losses.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/nn/losses.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::keras {

namespace {

constexpr double kEpsilon = 1e-7;  // Keras's backend epsilon, for probabilities

Tensor clipped_log(const Tensor& p) { return log(clip_by_value(p, kEpsilon, 1 - kEpsilon)); }

// -log p[label] per example from probabilities [N, C] (normalised as Keras does).
Tensor sparse_ce_from_probabilities(const Tensor& labels, const Tensor& p) {
  int64_t classes = p.shape().dim(-1);
  Tensor ids = cast(expand_dims(labels.rank() == p.rank() ? squeeze(labels, -1) : labels, -1),
                    DType::kInt64);
  Tensor onehot = cast(equal(ids, range(0, static_cast<double>(classes))), p.dtype());
  Tensor normalised = p / sum(p, {-1}, true);
  return mean(-sum(onehot * clipped_log(normalised), {-1}));
}

Loss sparse_categorical(bool from_logits) {
  return Loss("sparse_categorical_crossentropy",
              [from_logits](const Tensor& labels, const Tensor& outputs, const Tensor& logits) {
                if (from_logits) return nn::sparse_softmax_cross_entropy(labels, outputs);
                if (logits.defined()) return nn::sparse_softmax_cross_entropy(labels, logits);
                return sparse_ce_from_probabilities(labels, outputs);
              },
              {{"from_logits", from_logits ? 1.0 : 0.0}});
}

Loss categorical(bool from_logits) {
  return Loss("categorical_crossentropy",
              [from_logits](const Tensor& labels, const Tensor& outputs, const Tensor& logits) {
                Tensor y = cast(labels, outputs.dtype());
                if (from_logits) return nn::softmax_cross_entropy(y, outputs);
                if (logits.defined()) return nn::softmax_cross_entropy(y, logits);
                return mean(-sum(y * clipped_log(outputs / sum(outputs, {-1}, true)), {-1}));
              },
              {{"from_logits", from_logits ? 1.0 : 0.0}});
}

Loss binary(bool from_logits) {
  return Loss("binary_crossentropy",
              [from_logits](const Tensor& labels, const Tensor& outputs, const Tensor& logits) {
                Tensor y = cast(labels, outputs.dtype());
                if (y.rank() + 1 == outputs.rank()) y = expand_dims(y, -1);
                if (from_logits) return nn::sigmoid_cross_entropy(y, outputs);
                if (logits.defined()) return nn::sigmoid_cross_entropy(y, logits);
                Tensor per_element =
                    -(y * clipped_log(outputs) + (1.0 - y) * clipped_log(1.0 - outputs));
                return mean(mean(per_element, {-1}));
              },
              {{"from_logits", from_logits ? 1.0 : 0.0}});
}

Tensor as_outputs(const Tensor& labels, const Tensor& outputs) {
  Tensor y = cast(labels, outputs.dtype());
  if (y.rank() + 1 == outputs.rank()) y = expand_dims(y, -1);
  return y;
}

Loss regression(const std::string& name, double delta = 1.0) {
  return Loss(
      name,
      [name, delta](const Tensor& labels, const Tensor& outputs, const Tensor&) {
        Tensor y = as_outputs(labels, outputs);
        if (name == "mean_squared_error") return nn::mean_squared_error(y, outputs);
        if (name == "mean_absolute_error") return nn::mean_absolute_error(y, outputs);
        return nn::huber(y, outputs, delta);
      },
      name == "huber" ? std::map<std::string, double>{{"delta", delta}}
                      : std::map<std::string, double>{});
}

Loss by_name(const std::string& name, const std::map<std::string, double>& config) {
  auto number = [&](const char* key, double fallback) {
    auto it = config.find(key);
    return it == config.end() ? fallback : it->second;
  };
  bool from_logits = number("from_logits", 0) != 0;
  if (name == "sparse_categorical_crossentropy") return sparse_categorical(from_logits);
  if (name == "categorical_crossentropy") return categorical(from_logits);
  if (name == "binary_crossentropy") return binary(from_logits);
  if (name == "mean_squared_error" || name == "mse") return regression("mean_squared_error");
  if (name == "mean_absolute_error" || name == "mae") return regression("mean_absolute_error");
  if (name == "huber") return regression("huber", number("delta", 1.0));
  throw InvalidArgumentError(
      str_cat("unknown loss '", name, "'; known losses: ", join(losses::names())));
}

}  // namespace

Loss::Loss(std::string name, LossFn fn, std::map<std::string, double> config)
    : name_(std::move(name)), fn_(std::move(fn)), config_(std::move(config)) {
  if (!fn_) throw InvalidArgumentError(str_cat("loss '", name_, "' has no function"));
}
Loss::Loss(const char* name) : Loss(std::string(name)) {}
Loss::Loss(const std::string& name) : Loss(by_name(name, {})) {}

Tensor Loss::operator()(const Tensor& labels, const Tensor& outputs, const Tensor& logits) const {
  if (!labels.defined()) {
    throw InvalidArgumentError(str_cat("loss '", name_, "': the batch has no labels"));
  }
  return fn_(labels, outputs, logits);
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(CrossentropyOptions options)
    : Loss(sparse_categorical(options.from_logits)) {}
CategoricalCrossentropy::CategoricalCrossentropy(CrossentropyOptions options)
    : Loss(categorical(options.from_logits)) {}
BinaryCrossentropy::BinaryCrossentropy(CrossentropyOptions options)
    : Loss(binary(options.from_logits)) {}
MeanSquaredError::MeanSquaredError() : Loss(regression("mean_squared_error")) {}
MeanAbsoluteError::MeanAbsoluteError() : Loss(regression("mean_absolute_error")) {}
Huber::Huber(double delta) : Loss(regression("huber", delta)) {}

namespace losses {
std::vector<std::string> names() {
  return {"sparse_categorical_crossentropy",
          "categorical_crossentropy",
          "binary_crossentropy",
          "mean_squared_error",
          "mse",
          "mean_absolute_error",
          "mae",
          "huber"};
}
Loss from_config(const std::string& name, const std::map<std::string, double>& config) {
  return by_name(name, config);
}
}  // namespace losses

}  // namespace cadre::keras
