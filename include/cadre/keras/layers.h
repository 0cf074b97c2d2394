// Keras-style layers: objects that own the names of their variables and are called on
// symbolic tensors to build a model (functional API) or listed in a Sequential.
//
//   KerasTensor x = Input({784});
//   KerasTensor h = Dense(256, "relu")(x);
//   Model model(x, Dense(10)(h));
//
// A Layer is a handle: copies refer to the same layer, as Python references do. A layer's
// variables are found by its name in the Estimator's VariableStore ("dense/kernel"), so
// checkpoints written by fit() and by an Estimator running the same layers are the same.
// A layer without a name gets one when the model that first uses it is built ("dense",
// "dense_1", ... in the order of the model), so a program builds the same names every time.
//
// Calling a layer on a KerasTensor computes the output shape at once: a layer that cannot
// take its input throws InvalidArgumentError naming both layers and both shapes.
// Layers are immutable after construction except for that first naming; not for concurrent
// construction of models from several threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/ops/activation.h"
#include "cadre/tensor/dtype.h"

namespace cadre::keras {

// A layer's activation, by Keras name ("relu", "softmax", "linear", ...) or as
// cadre::Activation (nn::relu). An unknown name is an InvalidArgumentError listing the
// known ones, raised by the layer's constructor.
class ActivationArg {
 public:
  ActivationArg() = default;                        // linear
  ActivationArg(const char* name) : name_(name) {}  // NOLINT: implicit, as Keras takes strings
  ActivationArg(std::string name) : name_(std::move(name)) {}  // NOLINT
  ActivationArg(cadre::Activation activation);                 // NOLINT
  const std::string& name() const { return name_; }

 private:
  std::string name_ = "linear";
};

// The symbolic output of a layer (or a model input): its shape, with -1 for the batch
// dimension, and the layer call that produced it.
class KerasTensor {
 public:
  struct Node;  // the layer call behind it (private to Cadre: keras/layer_impl.h)

  explicit KerasTensor(std::shared_ptr<Node> node);
  // [-1, ...]: the batch first.
  const std::vector<int64_t>& shape() const;
  DType dtype() const;
  // The layer that produced it ("" for an input: then the input's feature name).
  std::string name() const;
  const std::shared_ptr<Node>& node() const { return node_; }

 private:
  std::shared_ptr<Node> node_;
};

struct InputOptions {
  // The feature of the input Dataset this input reads; a Dataset with a single feature
  // feeds a single-input model whatever its name.
  std::string name = "input";
  DType dtype = DType::kFloat32;
};
// A model input of shape [batch, ...shape].
KerasTensor Input(std::vector<int64_t> shape, InputOptions options = {});

class Layer {
 public:
  class Impl;  // what the layer is and computes (private to Cadre: keras/layer_impl.h)

  explicit Layer(std::shared_ptr<Impl> impl);
  // The layer's name ("" until a model names it).
  const std::string& name() const;
  // The Keras class name: "Dense", "Conv2D", ...
  const std::string& kind() const;
  KerasTensor operator()(const KerasTensor& input) const;
  // Layers of several inputs (Add, Concatenate).
  KerasTensor operator()(const std::vector<KerasTensor>& inputs) const;
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// The first element of a Sequential: the shape of one example (and its feature name).
class InputLayer : public Layer {
 public:
  explicit InputLayer(std::vector<int64_t> shape, InputOptions options = {});
};

struct DenseOptions {
  std::string name{};
  bool use_bias = true;
};
// activation(x·kernel + bias) over the last axis; variables name/kernel [in, units] and
// name/bias [units].
class Dense : public Layer {
 public:
  explicit Dense(int64_t units, ActivationArg activation = {}, DenseOptions options = {});
};

struct Conv2DOptions {
  std::string name{};
  std::array<int64_t, 2> strides{1, 1};
  std::string padding = "valid";  // or "same"
  bool use_bias = true;
};
// NHWC convolution; variables name/kernel [KH, KW, in, filters] and name/bias [filters].
class Conv2D : public Layer {
 public:
  Conv2D(int64_t filters, std::array<int64_t, 2> kernel_size, ActivationArg activation = {},
         Conv2DOptions options = {});
};

struct PoolingOptions {
  std::string name{};
  std::array<int64_t, 2> strides{0, 0};  // {0, 0}: the pool size
  std::string padding = "valid";
};
class MaxPooling2D : public Layer {
 public:
  explicit MaxPooling2D(std::array<int64_t, 2> pool_size = {2, 2}, PoolingOptions options = {});
};
class AveragePooling2D : public Layer {
 public:
  explicit AveragePooling2D(std::array<int64_t, 2> pool_size = {2, 2}, PoolingOptions options = {});
};

struct LayerOptions {
  std::string name{};
};
// [N, ...] -> [N, prod(...)].
class Flatten : public Layer {
 public:
  explicit Flatten(LayerOptions options = {});
};
// [N, ...] -> [N, target_shape...]; one dimension of target_shape may be -1.
class Reshape : public Layer {
 public:
  explicit Reshape(std::vector<int64_t> target_shape, LayerOptions options = {});
};
// Zeroes a fraction `rate` of its input in training (scaling the rest by 1 / (1 - rate)).
class Dropout : public Layer {
 public:
  explicit Dropout(double rate, LayerOptions options = {});
};
class Activation : public Layer {
 public:
  explicit Activation(ActivationArg activation, LayerOptions options = {});
};

struct BatchNormalizationOptions {
  std::string name{};
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  // Statistics over the global batch of every replica (tf.keras's SyncBatchNormalization).
  bool synchronized = false;
};
// Over every axis but the last; variables name/gamma, name/beta (trained),
// name/moving_mean and name/moving_variance (not trained).
class BatchNormalization : public Layer {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
};

// Integer ids of any shape -> ids' shape + [output_dim]; variable name/embeddings
// [input_dim, output_dim], with sparse gradients.
class Embedding : public Layer {
 public:
  Embedding(int64_t input_dim, int64_t output_dim, LayerOptions options = {});
};

// Elementwise sum of inputs of one shape.
class Add : public Layer {
 public:
  explicit Add(LayerOptions options = {});
};
// Inputs joined along `axis` (the others must agree).
class Concatenate : public Layer {
 public:
  explicit Concatenate(int axis = -1, LayerOptions options = {});
};

}  // namespace cadre::keras
