#include "examples/fashion_mnist/models.h"

#include "cadre/base/errors.h"
#include "cadre/nn/layers.h"

namespace cadre::examples {

Tensor mlp_logits(const Tensor& images, int64_t units) {
  Tensor x = nn::dense("hidden1", images, units, nn::relu);
  x = nn::dense("hidden2", x, units, nn::relu);
  return nn::dense("logits", x, 10);
}

Tensor cnn_logits(const Tensor& images) {
  Tensor x = images.reshape({-1, 28, 28, 1});
  x = nn::conv2d("conv1", x, 32, {3, 3}, nn::relu);
  x = nn::max_pool2d(x, {2, 2}, {2, 2});
  x = nn::conv2d("conv2", x, 64, {3, 3}, nn::relu);
  x = nn::max_pool2d(x, {2, 2}, {2, 2});
  x = nn::dense("dense1", nn::flatten(x), 128, nn::relu);
  return nn::dense("logits", x, 10);
}

namespace {

// The hidden layers' width of "mlp" (256) or "mlp:N"; 0 for any other name.
int64_t mlp_units(const std::string& model) {
  if (model == "mlp") return 256;
  if (!model.starts_with("mlp:") || model.size() > 13) return 0;
  int64_t units = 0;
  for (char c : model.substr(4)) {
    if (c < '0' || c > '9') return 0;
    units = units * 10 + (c - '0');
  }
  return units;
}

}  // namespace

void check_model_name(const std::string& model) {
  if (model != "cnn" && mlp_units(model) <= 0) {
    throw InvalidArgumentError("unknown model '" + model +
                               "'; expected mlp, mlp:N (N hidden units a layer) or cnn");
  }
}

Tensor model_logits(const std::string& model, const Tensor& images) {
  check_model_name(model);
  return model == "cnn" ? cnn_logits(images) : mlp_logits(images, mlp_units(model));
}

}  // namespace cadre::examples
