// What every built-in layer shares: its description, its activation argument, and the layer
// a saved model's config describes. The layers themselves, each computing with the
// functional layers of cadre/nn under its own name and knowing its output shape, weights
// and configuration, are in one file per family: core_layers.cc, conv_layers.cc,
// reshaping_layers.cc, merging_layers.cc, normalization_layers.cc.
#include "cadre/keras/layers.h"

#include "cadre/base/errors.h"
#include "cadre/ops/activation.h"
#include "core/base/strings.h"
#include "keras/layer_impl.h"

namespace cadre::keras {

namespace internal {

std::string dims_string(const Dims& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += dims[i] < 0 ? std::string("None") : std::to_string(dims[i]);
  }
  if (dims.size() == 1) out += ",";
  return out + ")";
}

}  // namespace internal

std::string Layer::Impl::describe() const {
  return name_.empty() ? str_cat("a ", kind_, " layer")
                       : str_cat("layer '", name_, "' (", kind_, ")");
}

namespace {

using internal::Config;

int64_t parse_int(const Config& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) throw DataLossError(str_cat("layer config: '", key, "' is missing"));
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw DataLossError(
        str_cat("layer config: '", key, "' = '", it->second, "' is not an integer"));
  }
}

double parse_double(const Config& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) throw DataLossError(str_cat("layer config: '", key, "' is missing"));
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    throw DataLossError(str_cat("layer config: '", key, "' = '", it->second, "' is not a number"));
  }
}

std::string text(const Config& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) throw DataLossError(str_cat("layer config: '", key, "' is missing"));
  return it->second;
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    try {
      out.push_back(std::stoll(text.substr(start, comma - start)));
    } catch (const std::exception&) {
      throw DataLossError(str_cat("layer config: '", text, "' is not a list of integers"));
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

namespace internal {

std::shared_ptr<LayerImpl> layer_from_config(const std::string& kind, const std::string& name,
                                             const Config& c) {
  auto flag = [&](const std::string& key) { return text(c, key) == "1"; };
  auto pair = [&](const std::string& key) {
    std::vector<int64_t> v = parse_list(text(c, key));
    if (v.size() != 2) throw DataLossError(str_cat("layer config: '", key, "' needs 2 values"));
    return std::array<int64_t, 2>{v[0], v[1]};
  };
  // Each through its public constructor, which checks the values as a user's call is checked.
  if (kind == "Dense") {
    return Dense(parse_int(c, "units"), text(c, "activation"), {name, flag("use_bias")}).impl();
  }
  if (kind == "Conv2D") {
    Conv2DOptions o{name, pair("strides"), text(c, "padding"), flag("use_bias")};
    return Conv2D(parse_int(c, "filters"), pair("kernel_size"), text(c, "activation"), o).impl();
  }
  if (kind == "MaxPooling2D" || kind == "AveragePooling2D") {
    PoolingOptions o{name, pair("strides"), text(c, "padding")};
    return kind == "MaxPooling2D" ? MaxPooling2D(pair("pool_size"), o).impl()
                                  : AveragePooling2D(pair("pool_size"), o).impl();
  }
  if (kind == "Flatten") return Flatten({name}).impl();
  if (kind == "Reshape") return Reshape(parse_list(text(c, "target_shape")), {name}).impl();
  if (kind == "Dropout") return Dropout(parse_double(c, "rate"), {name}).impl();
  if (kind == "Activation") return Activation(text(c, "activation"), {name}).impl();
  if (kind == "BatchNormalization") {
    return BatchNormalization({name, parse_double(c, "momentum"), parse_double(c, "epsilon"),
                               flag("center"), flag("scale"), flag("synchronized")})
        .impl();
  }
  if (kind == "Embedding") {
    return Embedding(parse_int(c, "input_dim"), parse_int(c, "output_dim"), {name}).impl();
  }
  if (kind == "Add") return Add({name}).impl();
  if (kind == "Concatenate")
    return Concatenate(static_cast<int>(parse_int(c, "axis")), {name}).impl();
  throw DataLossError(str_cat("unknown layer kind '", kind, "' in a saved model"));
}

}  // namespace internal

ActivationArg::ActivationArg(cadre::Activation activation) {
  switch (activation) {
    case cadre::Activation::kRelu:
      name_ = "relu";
      break;
    case cadre::Activation::kSigmoid:
      name_ = "sigmoid";
      break;
    case cadre::Activation::kTanh:
      name_ = "tanh";
      break;
    case cadre::Activation::kGelu:
      name_ = "gelu";
      break;
    case cadre::Activation::kElu:
      name_ = "elu";
      break;
    case cadre::Activation::kSoftplus:
      name_ = "softplus";
      break;
    case cadre::Activation::kNone:
      name_ = "linear";
      break;
    default:
      throw InvalidArgumentError("this activation has no Keras layer equivalent here");
  }
}

}  // namespace cadre::keras
