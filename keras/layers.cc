// The built-in layers: each computes with the functional layers of cadre/nn under its own
// name, and knows its output shape, weights and configuration.
#include <algorithm>
#include <numeric>

#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/nn/layers.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
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

std::string LayerImpl::describe() const {
  return name_.empty() ? str_cat("a ", kind_, " layer") : str_cat("layer '", name_, "' (", kind_, ")");
}

}  // namespace internal

namespace {

using internal::Config;
using internal::Dims;
using internal::LayerImpl;
using internal::WeightInfo;

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names{"linear", "relu",     "sigmoid", "tanh",
                                              "gelu",   "elu",      "softplus", "softmax"};
  return names;
}

void check_activation(const std::string& name) {
  const auto& names = activation_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InvalidArgumentError(str_cat("unknown activation '", name, "'; expected one of ",
                                       join(names, ", ")));
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

// Applies a Keras activation to pre-activations z, keeping them as logits for a final
// softmax or sigmoid.
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

int64_t parse_int(const Config& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) throw DataLossError(str_cat("layer config: '", key, "' is missing"));
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw DataLossError(str_cat("layer config: '", key, "' = '", it->second, "' is not an integer"));
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

std::string int_list(const std::vector<int64_t>& values) { return join(values, ","); }
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

Padding padding_of(const std::string& name) {
  if (name == "valid") return Padding::kValid;
  if (name == "same") return Padding::kSame;
  throw InvalidArgumentError(str_cat("padding '", name, "'; expected valid or same"));
}

void require_rank(const Dims& in, int rank, const std::string& what) {
  if (static_cast<int>(in.size()) != rank) {
    throw InvalidArgumentError(str_cat("expected ", what, " of rank ", rank, ", got rank ", in.size()));
  }
}

// Output size of a window of `k` (dilated to `span`) sliding by `s` over `in`.
int64_t window_out(int64_t in, int64_t span, int64_t s, Padding padding, const std::string& what) {
  if (in < 0) return -1;
  if (padding == Padding::kSame) return (in + s - 1) / s;
  if (in < span) {
    throw InvalidArgumentError(str_cat("the ", what, " (", span, ") is larger than the input (", in,
                                       ") with 'valid' padding"));
  }
  return (in - span) / s + 1;
}

class DenseImpl : public LayerImpl {
 public:
  DenseImpl(int64_t units, std::string activation, bool use_bias, std::string name)
      : LayerImpl("Dense", std::move(name)), units_(units), activation_(std::move(activation)),
        use_bias_(use_bias) {
    if (units <= 0) throw InvalidArgumentError(str_cat("Dense: units must be positive, got ", units));
    check_activation(activation_);
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    if (in[0].size() < 2) {
      throw InvalidArgumentError(str_cat("expected at least 2 dimensions (batch, features), got ",
                                         internal::dims_string(in[0])));
    }
    if (in[0].back() < 0) throw InvalidArgumentError("the last dimension of the input must be known");
    Dims out = in[0];
    out.back() = units_;
    return out;
  }
  std::vector<WeightInfo> weights(const std::vector<Dims>& in) const override {
    std::vector<WeightInfo> w{{"kernel", {in[0].back(), units_}}};
    if (use_bias_) w.push_back({"bias", {units_}});
    return w;
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor* logits) const override {
    nn::DenseOptions options;
    options.use_bias = use_bias_;
    if (activation_ == "softmax" || activation_ == "sigmoid" || activation_ == "linear") {
      return activate_named(nn::dense(name(), in[0], units_, cadre::Activation::kNone, options),
                            activation_, logits);
    }
    return nn::dense(name(), in[0], units_, fused_activation(activation_), options);
  }
  Config config() const override {
    return {{"units", std::to_string(units_)}, {"activation", activation_},
            {"use_bias", use_bias_ ? "1" : "0"}};
  }

 private:
  int64_t units_;
  std::string activation_;
  bool use_bias_;
};

class Conv2DImpl : public LayerImpl {
 public:
  Conv2DImpl(int64_t filters, std::array<int64_t, 2> kernel, std::string activation,
             Conv2DOptions options)
      : LayerImpl("Conv2D", options.name), filters_(filters), kernel_(kernel),
        activation_(std::move(activation)), options_(std::move(options)) {
    if (filters <= 0 || kernel[0] <= 0 || kernel[1] <= 0 || options_.strides[0] <= 0 ||
        options_.strides[1] <= 0) {
      throw InvalidArgumentError("Conv2D: filters, kernel_size and strides must be positive");
    }
    check_activation(activation_);
    padding_of(options_.padding);
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    require_rank(in[0], 4, "an NHWC input (batch, height, width, channels)");
    if (in[0][3] < 0) throw InvalidArgumentError("the channels of the input must be known");
    Padding p = padding_of(options_.padding);
    return {in[0][0], window_out(in[0][1], kernel_[0], options_.strides[0], p, "kernel height"),
            window_out(in[0][2], kernel_[1], options_.strides[1], p, "kernel width"), filters_};
  }
  std::vector<WeightInfo> weights(const std::vector<Dims>& in) const override {
    std::vector<WeightInfo> w{{"kernel", {kernel_[0], kernel_[1], in[0][3], filters_}}};
    if (options_.use_bias) w.push_back({"bias", {filters_}});
    return w;
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor* logits) const override {
    nn::Conv2DOptions o;
    o.strides = options_.strides;
    o.padding = padding_of(options_.padding);
    o.use_bias = options_.use_bias;
    bool fused = activation_ != "softmax" && activation_ != "sigmoid" && activation_ != "linear";
    Tensor z = nn::conv2d(name(), in[0], filters_, kernel_,
                          fused ? fused_activation(activation_) : cadre::Activation::kNone, o);
    return fused ? z : activate_named(z, activation_, logits);
  }
  Config config() const override {
    return {{"filters", std::to_string(filters_)},
            {"kernel_size", int_list({kernel_[0], kernel_[1]})},
            {"activation", activation_},
            {"strides", int_list({options_.strides[0], options_.strides[1]})},
            {"padding", options_.padding},
            {"use_bias", options_.use_bias ? "1" : "0"}};
  }

 private:
  int64_t filters_;
  std::array<int64_t, 2> kernel_;
  std::string activation_;
  Conv2DOptions options_;
};

class PoolImpl : public LayerImpl {
 public:
  PoolImpl(std::string kind, std::array<int64_t, 2> pool, PoolingOptions options)
      : LayerImpl(std::move(kind), options.name), pool_(pool), options_(std::move(options)) {
    if (options_.strides[0] == 0 && options_.strides[1] == 0) options_.strides = pool_;
    if (pool[0] <= 0 || pool[1] <= 0 || options_.strides[0] <= 0 || options_.strides[1] <= 0) {
      throw InvalidArgumentError(str_cat(this->kind(), ": pool_size and strides must be positive"));
    }
    padding_of(options_.padding);
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    require_rank(in[0], 4, "an NHWC input (batch, height, width, channels)");
    Padding p = padding_of(options_.padding);
    return {in[0][0], window_out(in[0][1], pool_[0], options_.strides[0], p, "pool height"),
            window_out(in[0][2], pool_[1], options_.strides[1], p, "pool width"), in[0][3]};
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    Padding p = padding_of(options_.padding);
    return kind() == "MaxPooling2D" ? nn::max_pool2d(in[0], pool_, options_.strides, p)
                                    : nn::avg_pool2d(in[0], pool_, options_.strides, p);
  }
  Config config() const override {
    return {{"pool_size", int_list({pool_[0], pool_[1]})},
            {"strides", int_list({options_.strides[0], options_.strides[1]})},
            {"padding", options_.padding}};
  }

 private:
  std::array<int64_t, 2> pool_;
  PoolingOptions options_;
};

class FlattenImpl : public LayerImpl {
 public:
  explicit FlattenImpl(std::string name) : LayerImpl("Flatten", std::move(name)) {}
  Dims output_shape(const std::vector<Dims>& in) const override {
    if (in[0].size() < 2) throw InvalidArgumentError("expected a batch of at least one dimension");
    int64_t n = 1;
    for (size_t i = 1; i < in[0].size(); ++i) n = (n < 0 || in[0][i] < 0) ? -1 : n * in[0][i];
    return {in[0][0], n};
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    return nn::flatten(in[0]);
  }
  Config config() const override { return {}; }
};

class ReshapeImpl : public LayerImpl {
 public:
  ReshapeImpl(std::vector<int64_t> target, std::string name)
      : LayerImpl("Reshape", std::move(name)), target_(std::move(target)) {
    if (std::count(target_.begin(), target_.end(), -1) > 1 ||
        std::any_of(target_.begin(), target_.end(), [](int64_t d) { return d == 0 || d < -1; })) {
      throw InvalidArgumentError(str_cat("Reshape: target_shape ", internal::dims_string(target_),
                                         " must be positive sizes with at most one -1"));
    }
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    int64_t have = 1;
    for (size_t i = 1; i < in[0].size(); ++i) have = (have < 0 || in[0][i] < 0) ? -1 : have * in[0][i];
    int64_t want = 1;
    for (int64_t d : target_) want *= d > 0 ? d : 1;
    Dims out{in[0][0]};
    for (int64_t d : target_) out.push_back(d);
    if (have < 0) return out;
    bool inferred = std::count(target_.begin(), target_.end(), -1) == 1;
    if (inferred ? have % want != 0 : have != want) {
      throw InvalidArgumentError(str_cat("cannot reshape ", have, " values per example into ",
                                         internal::dims_string(target_)));
    }
    for (auto& d : out) {
      if (&d != &out[0] && d == -1) d = have / want;
    }
    return out;
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    std::vector<int64_t> dims{in[0].shape()[0]};
    dims.insert(dims.end(), target_.begin(), target_.end());
    return in[0].reshape(dims);
  }
  Config config() const override { return {{"target_shape", int_list(target_)}}; }

 private:
  std::vector<int64_t> target_;
};

class DropoutImpl : public LayerImpl {
 public:
  DropoutImpl(double rate, std::string name) : LayerImpl("Dropout", std::move(name)), rate_(rate) {
    if (rate < 0 || rate >= 1) {
      throw InvalidArgumentError(str_cat("Dropout: rate must be in [0, 1), got ", rate));
    }
  }
  Dims output_shape(const std::vector<Dims>& in) const override { return in[0]; }
  Tensor call(const std::vector<Tensor>& in, bool training, Tensor*) const override {
    return nn::dropout(in[0], rate_, training);
  }
  Config config() const override { return {{"rate", str_cat(rate_)}}; }

 private:
  double rate_;
};

class ActivationImpl : public LayerImpl {
 public:
  ActivationImpl(std::string activation, std::string name)
      : LayerImpl("Activation", std::move(name)), activation_(std::move(activation)) {
    check_activation(activation_);
  }
  Dims output_shape(const std::vector<Dims>& in) const override { return in[0]; }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor* logits) const override {
    return activate_named(in[0], activation_, logits);
  }
  Config config() const override { return {{"activation", activation_}}; }

 private:
  std::string activation_;
};

class BatchNormImpl : public LayerImpl {
 public:
  explicit BatchNormImpl(BatchNormalizationOptions options)
      : LayerImpl("BatchNormalization", options.name), options_(std::move(options)) {}
  Dims output_shape(const std::vector<Dims>& in) const override {
    if (in[0].size() < 2 || in[0].back() < 0) {
      throw InvalidArgumentError("expected a batch with a known last (channel) dimension");
    }
    return in[0];
  }
  std::vector<WeightInfo> weights(const std::vector<Dims>& in) const override {
    int64_t c = in[0].back();
    std::vector<WeightInfo> w;
    if (options_.scale) w.push_back({"gamma", {c}});
    if (options_.center) w.push_back({"beta", {c}});
    w.push_back({"moving_mean", {c}, false});
    w.push_back({"moving_variance", {c}, false});
    return w;
  }
  Tensor call(const std::vector<Tensor>& in, bool training, Tensor*) const override {
    nn::BatchNormOptions o;
    o.momentum = options_.momentum;
    o.epsilon = options_.epsilon;
    o.center = options_.center;
    o.scale = options_.scale;
    return options_.synchronized ? nn::sync_batch_norm(name(), in[0], training, o)
                                 : nn::batch_norm(name(), in[0], training, o);
  }
  Config config() const override {
    return {{"momentum", str_cat(options_.momentum)},
            {"epsilon", str_cat(options_.epsilon)},
            {"center", options_.center ? "1" : "0"},
            {"scale", options_.scale ? "1" : "0"},
            {"synchronized", options_.synchronized ? "1" : "0"}};
  }

 private:
  BatchNormalizationOptions options_;
};

class EmbeddingImpl : public LayerImpl {
 public:
  EmbeddingImpl(int64_t input_dim, int64_t output_dim, std::string name)
      : LayerImpl("Embedding", std::move(name)), input_dim_(input_dim), output_dim_(output_dim) {
    if (input_dim <= 0 || output_dim <= 0) {
      throw InvalidArgumentError("Embedding: input_dim and output_dim must be positive");
    }
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    Dims out = in[0];
    out.push_back(output_dim_);
    return out;
  }
  DType output_dtype(const std::vector<DType>& in) const override {
    if (in[0] != DType::kInt32 && in[0] != DType::kInt64) {
      throw InvalidArgumentError(str_cat("expected integer ids (int32 or int64), got ",
                                         dtype_name(in[0])));
    }
    return DType::kFloat32;
  }
  std::vector<WeightInfo> weights(const std::vector<Dims>&) const override {
    return {{"embeddings", {input_dim_, output_dim_}}};
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    return nn::embedding(name(), in[0], input_dim_, output_dim_);
  }
  Config config() const override {
    return {{"input_dim", std::to_string(input_dim_)}, {"output_dim", std::to_string(output_dim_)}};
  }

 private:
  int64_t input_dim_, output_dim_;
};

class MergeImpl : public LayerImpl {
 public:
  MergeImpl(std::string kind, int axis, std::string name)
      : LayerImpl(std::move(kind), std::move(name)), axis_(axis) {}
  int arity() const override { return 0; }
  Dims output_shape(const std::vector<Dims>& in) const override {
    Dims out = in[0];
    int rank = static_cast<int>(out.size());
    int axis = axis_ < 0 ? axis_ + rank : axis_;
    if (kind() == "Concatenate" && (axis <= 0 || axis >= rank)) {
      throw InvalidArgumentError(str_cat("axis ", axis_, " is not a feature axis of rank ", rank));
    }
    for (size_t i = 1; i < in.size(); ++i) {
      if (static_cast<int>(in[i].size()) != rank) {
        throw InvalidArgumentError(str_cat("inputs of different ranks: ", internal::dims_string(in[0]),
                                           " and ", internal::dims_string(in[i])));
      }
      for (int d = 1; d < rank; ++d) {
        if (kind() == "Concatenate" && d == axis) {
          out[d] = (out[d] < 0 || in[i][d] < 0) ? -1 : out[d] + in[i][d];
        } else if (in[i][d] != out[d] && in[i][d] >= 0 && out[d] >= 0) {
          throw InvalidArgumentError(str_cat("inputs of incompatible shapes: ",
                                             internal::dims_string(in[0]), " and ",
                                             internal::dims_string(in[i])));
        }
      }
    }
    return out;
  }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override {
    if (kind() == "Concatenate") return concat(in, axis_ < 0 ? axis_ + in[0].rank() : axis_);
    Tensor sum = in[0];
    for (size_t i = 1; i < in.size(); ++i) sum = add(sum, in[i]);
    return sum;
  }
  Config config() const override {
    return kind() == "Concatenate" ? Config{{"axis", std::to_string(axis_)}} : Config{};
  }

 private:
  int axis_;
};

class InputLayerImpl : public LayerImpl {
 public:
  InputLayerImpl(Dims shape, InputOptions options)
      : LayerImpl("InputLayer", options.name), shape_(std::move(shape)), options_(options) {}
  Dims output_shape(const std::vector<Dims>& in) const override { return in[0]; }
  Tensor call(const std::vector<Tensor>& in, bool, Tensor*) const override { return in[0]; }
  Config config() const override { return {}; }
  const Dims& shape() const { return shape_; }
  const InputOptions& options() const { return options_; }

 private:
  Dims shape_;
  InputOptions options_;
};

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
  if (kind == "Dense") {
    return std::make_shared<DenseImpl>(parse_int(c, "units"), text(c, "activation"),
                                       flag("use_bias"), name);
  }
  if (kind == "Conv2D") {
    Conv2DOptions o{name, pair("strides"), text(c, "padding"), flag("use_bias")};
    return std::make_shared<Conv2DImpl>(parse_int(c, "filters"), pair("kernel_size"),
                                        text(c, "activation"), o);
  }
  if (kind == "MaxPooling2D" || kind == "AveragePooling2D") {
    return std::make_shared<PoolImpl>(kind, pair("pool_size"),
                                      PoolingOptions{name, pair("strides"), text(c, "padding")});
  }
  if (kind == "Flatten") return std::make_shared<FlattenImpl>(name);
  if (kind == "Reshape") return std::make_shared<ReshapeImpl>(parse_list(text(c, "target_shape")), name);
  if (kind == "Dropout") return std::make_shared<DropoutImpl>(parse_double(c, "rate"), name);
  if (kind == "Activation") return std::make_shared<ActivationImpl>(text(c, "activation"), name);
  if (kind == "BatchNormalization") {
    return std::make_shared<BatchNormImpl>(BatchNormalizationOptions{
        name, parse_double(c, "momentum"), parse_double(c, "epsilon"), flag("center"),
        flag("scale"), flag("synchronized")});
  }
  if (kind == "Embedding") {
    return std::make_shared<EmbeddingImpl>(parse_int(c, "input_dim"), parse_int(c, "output_dim"), name);
  }
  if (kind == "Add") return std::make_shared<MergeImpl>("Add", 0, name);
  if (kind == "Concatenate") {
    return std::make_shared<MergeImpl>("Concatenate", static_cast<int>(parse_int(c, "axis")), name);
  }
  throw DataLossError(str_cat("unknown layer kind '", kind, "' in a saved model"));
}

bool is_input_layer(const LayerImpl& layer) { return layer.kind() == "InputLayer"; }
std::pair<Dims, InputOptions> input_layer_spec(const LayerImpl& layer) {
  const auto& input = static_cast<const InputLayerImpl&>(layer);
  return {input.shape(), input.options()};
}

}  // namespace internal

ActivationArg::ActivationArg(cadre::Activation activation) {
  switch (activation) {
    case cadre::Activation::kRelu: name_ = "relu"; break;
    case cadre::Activation::kSigmoid: name_ = "sigmoid"; break;
    case cadre::Activation::kTanh: name_ = "tanh"; break;
    case cadre::Activation::kGelu: name_ = "gelu"; break;
    case cadre::Activation::kElu: name_ = "elu"; break;
    case cadre::Activation::kSoftplus: name_ = "softplus"; break;
    case cadre::Activation::kNone: name_ = "linear"; break;
    default:
      throw InvalidArgumentError("this activation has no Keras layer equivalent here");
  }
}

InputLayer::InputLayer(std::vector<int64_t> shape, InputOptions options)
    : Layer(std::make_shared<InputLayerImpl>(std::move(shape), std::move(options))) {}
Dense::Dense(int64_t units, ActivationArg activation, DenseOptions options)
    : Layer(std::make_shared<DenseImpl>(units, activation.name(), options.use_bias, options.name)) {}
Conv2D::Conv2D(int64_t filters, std::array<int64_t, 2> kernel_size, ActivationArg activation,
               Conv2DOptions options)
    : Layer(std::make_shared<Conv2DImpl>(filters, kernel_size, activation.name(), std::move(options))) {}
MaxPooling2D::MaxPooling2D(std::array<int64_t, 2> pool_size, PoolingOptions options)
    : Layer(std::make_shared<PoolImpl>("MaxPooling2D", pool_size, std::move(options))) {}
AveragePooling2D::AveragePooling2D(std::array<int64_t, 2> pool_size, PoolingOptions options)
    : Layer(std::make_shared<PoolImpl>("AveragePooling2D", pool_size, std::move(options))) {}
Flatten::Flatten(LayerOptions options) : Layer(std::make_shared<FlattenImpl>(options.name)) {}
Reshape::Reshape(std::vector<int64_t> target_shape, LayerOptions options)
    : Layer(std::make_shared<ReshapeImpl>(std::move(target_shape), options.name)) {}
Dropout::Dropout(double rate, LayerOptions options)
    : Layer(std::make_shared<DropoutImpl>(rate, options.name)) {}
Activation::Activation(ActivationArg activation, LayerOptions options)
    : Layer(std::make_shared<ActivationImpl>(activation.name(), options.name)) {}
BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(std::make_shared<BatchNormImpl>(std::move(options))) {}
Embedding::Embedding(int64_t input_dim, int64_t output_dim, LayerOptions options)
    : Layer(std::make_shared<EmbeddingImpl>(input_dim, output_dim, options.name)) {}
Add::Add(LayerOptions options) : Layer(std::make_shared<MergeImpl>("Add", 0, options.name)) {}
Concatenate::Concatenate(int axis, LayerOptions options)
    : Layer(std::make_shared<MergeImpl>("Concatenate", axis, options.name)) {}

}  // namespace cadre::keras
