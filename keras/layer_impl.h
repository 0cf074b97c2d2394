// What a layer is behind the public Layer handle: its output shape for given input shapes
// (checked when the model is built), its weights (for summary), its computation (run by
// model_fn each step, with variables found by the layer's name) and its configuration
// (for save and load_model).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cadre/keras/layers.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/tensor.h"

namespace cadre::keras {
namespace internal {

// A shape with -1 for an unknown dimension (the batch).
using Dims = std::vector<int64_t>;
using Config = std::map<std::string, std::string>;

// "(None, 26, 26, 32)", as Keras prints shapes.
std::string dims_string(const Dims& dims);

struct WeightInfo {
  std::string name;  // under the layer's name: "kernel"
  Dims shape;
  bool trainable = true;
};

}  // namespace internal

class Layer::Impl {
 public:
  using Dims = internal::Dims;
  using Config = internal::Config;
  using WeightInfo = internal::WeightInfo;

  explicit Impl(std::string kind, std::string name = "")
      : kind_(std::move(kind)), name_(std::move(name)) {}
  virtual ~Impl() = default;

  const std::string& kind() const { return kind_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // "layer 'dense_1' (Dense)", or "a Dense layer" before it is named.
  std::string describe() const;

  // Inputs the layer takes: 1, or 0 for any number from 2 (Add, Concatenate).
  virtual int arity() const { return 1; }
  // The output shape; InvalidArgumentError saying what the layer expected otherwise.
  virtual Dims output_shape(const std::vector<Dims>& inputs) const = 0;
  virtual DType output_dtype(const std::vector<DType>& inputs) const { return DType::kFloat32; }
  virtual std::vector<WeightInfo> weights(const std::vector<Dims>& inputs) const { return {}; }
  // The layer on a batch. A layer ending in a softmax or sigmoid sets *logits to what
  // entered it (cross-entropies use it).
  virtual Tensor call(const std::vector<Tensor>& inputs, bool training, Tensor* logits) const = 0;
  // The constructor's arguments, as text.
  virtual Config config() const = 0;

 private:
  std::string kind_;
  std::string name_;
};

// A layer call in a model's graph (or a model input, without a layer).
struct KerasTensor::Node {
  std::shared_ptr<Layer::Impl> layer;
  std::vector<std::shared_ptr<Node>> inbound;
  internal::Dims shape;
  DType dtype = DType::kFloat32;
  std::string input_name;  // an input's feature
};

namespace internal {

using LayerImpl = Layer::Impl;
using Node = KerasTensor::Node;

// The layer of `kind` from its saved config; DataLossError for an unknown kind or a bad value.
std::shared_ptr<LayerImpl> layer_from_config(const std::string& kind, const std::string& name,
                                             const Config& config);

// InputLayer: the first element of a Sequential, and its shape and options.
bool is_input_layer(const LayerImpl& layer);
std::pair<Dims, InputOptions> input_layer_spec(const LayerImpl& layer);

// The node of `layer` called on `inbound`, its shape checked (InvalidArgumentError naming
// both layers and shapes).
std::shared_ptr<Node> call_layer(const std::shared_ptr<LayerImpl>& layer,
                                 std::vector<std::shared_ptr<Node>> inbound);
std::shared_ptr<Node> input_node(Dims shape, std::string name, DType dtype);

}  // namespace internal
}  // namespace cadre::keras
