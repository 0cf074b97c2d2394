#include "keras/layer_util.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "core/base/strings.h"

namespace cadre::keras::internal {

namespace {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names{"linear", "relu", "sigmoid",  "tanh",
                                              "gelu",   "elu",  "softplus", "softmax"};
  return names;
}

}  // namespace

void check_activation(const std::string& name) {
  const auto& names = activation_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InvalidArgumentError(
        str_cat("unknown activation '", name, "'; expected one of ", join(names, ", ")));
  }
}

cadre::Activation fused_activation(const std::string& name) {
  if (name == "relu") return cadre::Activation::kRelu;
  if (name == "sigmoid") return cadre::Activation::kSigmoid;
  if (name == "tanh") return cadre::Activation::kTanh;
  if (name == "gelu") return cadre::Activation::kGelu;
  if (name == "elu") return cadre::Activation::kElu;
  if (name == "softplus") return cadre::Activation::kSoftplus;
  return cadre::Activation::kNone;
}

Tensor activate_named(const Tensor& z, const std::string& name, Tensor* logits) {
  if (name == "softmax") {
    if (logits) *logits = z;
    return softmax(z);
  }
  if (name == "sigmoid") {
    if (logits) *logits = z;
    return sigmoid(z);
  }
  return name == "linear" ? z : activate(z, fused_activation(name));
}

std::string int_list(const std::vector<int64_t>& values) { return join(values, ","); }

}  // namespace cadre::keras::internal
