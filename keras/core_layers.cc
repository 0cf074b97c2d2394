// The core layers: InputLayer, Dense, Activation, Dropout and Embedding.
#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/nn/layers.h"
#include "cadre/ops/activation.h"
#include "core/base/strings.h"
#include "keras/layer_impl.h"
#include "keras/layer_util.h"

namespace cadre::keras {

namespace {

using internal::activate_named;
using internal::check_activation;
using internal::Config;
using internal::Dims;
using internal::fused_activation;
using internal::LayerImpl;
using internal::WeightInfo;

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

class DenseImpl : public LayerImpl {
 public:
  DenseImpl(int64_t units, std::string activation, bool use_bias, std::string name)
      : LayerImpl("Dense", std::move(name)),
        units_(units),
        activation_(std::move(activation)),
        use_bias_(use_bias) {
    if (units <= 0)
      throw InvalidArgumentError(str_cat("Dense: units must be positive, got ", units));
    check_activation(activation_);
  }
  Dims output_shape(const std::vector<Dims>& in) const override {
    if (in[0].size() < 2) {
      throw InvalidArgumentError(str_cat("expected at least 2 dimensions (batch, features), got ",
                                         internal::dims_string(in[0])));
    }
    if (in[0].back() < 0)
      throw InvalidArgumentError("the last dimension of the input must be known");
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
    return {{"units", std::to_string(units_)},
            {"activation", activation_},
            {"use_bias", use_bias_ ? "1" : "0"}};
  }

 private:
  int64_t units_;
  std::string activation_;
  bool use_bias_;
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
      throw InvalidArgumentError(
          str_cat("expected integer ids (int32 or int64), got ", dtype_name(in[0])));
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

}  // namespace

namespace internal {

bool is_input_layer(const LayerImpl& layer) { return layer.kind() == "InputLayer"; }
std::pair<Dims, InputOptions> input_layer_spec(const LayerImpl& layer) {
  const auto& input = static_cast<const InputLayerImpl&>(layer);
  return {input.shape(), input.options()};
}

}  // namespace internal

InputLayer::InputLayer(std::vector<int64_t> shape, InputOptions options)
    : Layer(std::make_shared<InputLayerImpl>(std::move(shape), std::move(options))) {}
Dense::Dense(int64_t units, ActivationArg activation, DenseOptions options)
    : Layer(std::make_shared<DenseImpl>(units, activation.name(), options.use_bias, options.name)) {
}
Activation::Activation(ActivationArg activation, LayerOptions options)
    : Layer(std::make_shared<ActivationImpl>(activation.name(), options.name)) {}
Dropout::Dropout(double rate, LayerOptions options)
    : Layer(std::make_shared<DropoutImpl>(rate, options.name)) {}
Embedding::Embedding(int64_t input_dim, int64_t output_dim, LayerOptions options)
    : Layer(std::make_shared<EmbeddingImpl>(input_dim, output_dim, options.name)) {}

}  // namespace cadre::keras
