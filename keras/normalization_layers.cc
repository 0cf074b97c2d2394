// The normalization layer: BatchNormalization (synchronized across replicas or not).
#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/nn/layers.h"
#include "core/base/strings.h"
#include "keras/layer_impl.h"

namespace cadre::keras {

namespace {

using internal::Config;
using internal::Dims;
using internal::LayerImpl;
using internal::WeightInfo;

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

}  // namespace

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(std::make_shared<BatchNormImpl>(std::move(options))) {}

}  // namespace cadre::keras
