#include "examples/fashion_mnist/models.h"

#include "cadre/base/errors.h"
#include "cadre/nn/layers.h"

namespace cadre::examples {

Tensor mlp_logits(const Tensor& images) {
  Tensor x = nn::dense("hidden1", images, 256, nn::relu);
  x = nn::dense("hidden2", x, 256, nn::relu);
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

void check_model_name(const std::string& model) {
  if (model != "mlp" && model != "cnn") {
    throw InvalidArgumentError("unknown model '" + model + "'; expected mlp or cnn");
  }
}

Tensor model_logits(const std::string& model, const Tensor& images) {
  check_model_name(model);
  return model == "mlp" ? mlp_logits(images) : cnn_logits(images);
}

}  // namespace cadre::examples
