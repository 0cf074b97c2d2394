// The reshaping layers: Flatten and Reshape.
#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/keras/layers.h"
#include "cadre/nn/layers.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "keras/layer_impl.h"
#include "keras/layer_util.h"

namespace cadre::keras {

namespace {

using internal::Config;
using internal::Dims;
using internal::int_list;
using internal::LayerImpl;

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
    for (size_t i = 1; i < in[0].size(); ++i)
      have = (have < 0 || in[0][i] < 0) ? -1 : have * in[0][i];
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

}  // namespace

Flatten::Flatten(LayerOptions options) : Layer(std::make_shared<FlattenImpl>(options.name)) {}
Reshape::Reshape(std::vector<int64_t> target_shape, LayerOptions options)
    : Layer(std::make_shared<ReshapeImpl>(std::move(target_shape), options.name)) {}

}  // namespace cadre::keras
