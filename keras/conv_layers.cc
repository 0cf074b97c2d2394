// The convolution and pooling layers: Conv2D, MaxPooling2D and AveragePooling2D (NHWC).
#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/nn/layers.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/nn.h"
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
using internal::int_list;
using internal::LayerImpl;
using internal::WeightInfo;

Padding padding_of(const std::string& name) {
  if (name == "valid") return Padding::kValid;
  if (name == "same") return Padding::kSame;
  throw InvalidArgumentError(str_cat("padding '", name, "'; expected valid or same"));
}

void require_rank(const Dims& in, int rank, const std::string& what) {
  if (static_cast<int>(in.size()) != rank) {
    throw InvalidArgumentError(
        str_cat("expected ", what, " of rank ", rank, ", got rank ", in.size()));
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

class Conv2DImpl : public LayerImpl {
 public:
  Conv2DImpl(int64_t filters, std::array<int64_t, 2> kernel, std::string activation,
             Conv2DOptions options)
      : LayerImpl("Conv2D", options.name),
        filters_(filters),
        kernel_(kernel),
        activation_(std::move(activation)),
        options_(std::move(options)) {
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

}  // namespace

Conv2D::Conv2D(int64_t filters, std::array<int64_t, 2> kernel_size, ActivationArg activation,
               Conv2DOptions options)
    : Layer(std::make_shared<Conv2DImpl>(filters, kernel_size, activation.name(),
                                         std::move(options))) {}
MaxPooling2D::MaxPooling2D(std::array<int64_t, 2> pool_size, PoolingOptions options)
    : Layer(std::make_shared<PoolImpl>("MaxPooling2D", pool_size, std::move(options))) {}
AveragePooling2D::AveragePooling2D(std::array<int64_t, 2> pool_size, PoolingOptions options)
    : Layer(std::make_shared<PoolImpl>("AveragePooling2D", pool_size, std::move(options))) {}

}  // namespace cadre::keras
