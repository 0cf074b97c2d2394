// Layers as functions, in the style of tf.compat.v1.layers: each call computes the layer
// on its input, and its variables are found by `name` (under the thread's name scopes) in
// the current VariableStore, created on the first call. Calling model code every step is
// therefore cheap and stateless.
#pragma once

#include <array>
#include <string>

#include "cadre/nn/initializers.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/nn.h"
#include "cadre/tensor/tensor.h"

namespace cadre::nn {

// Activation names for layer arguments: nn::dense("h", x, 256, nn::relu).
inline constexpr Activation linear = Activation::kNone;
inline constexpr Activation relu = Activation::kRelu;
inline constexpr Activation sigmoid = Activation::kSigmoid;
inline constexpr Activation tanh = Activation::kTanh;
inline constexpr Activation gelu = Activation::kGelu;
inline constexpr Activation elu = Activation::kElu;
inline constexpr Activation softplus = Activation::kSoftplus;

struct DenseOptions {
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
};

// activation(x·kernel + bias); variables name/kernel [in, units] and name/bias [units].
Tensor dense(const std::string& name, const Tensor& x, int64_t units,
             Activation activation = Activation::kNone, const DenseOptions& options = {});

struct Conv2DOptions {
  std::array<int64_t, 2> strides{1, 1};
  Padding padding = Padding::kValid;
  std::array<int64_t, 2> dilations{1, 1};
  bool use_bias = true;
  Initializer kernel_initializer = initializers::glorot_uniform();
  Initializer bias_initializer = initializers::zeros();
};

// NHWC convolution; variables name/kernel [KH, KW, in, filters] and name/bias [filters].
Tensor conv2d(const std::string& name, const Tensor& x, int64_t filters,
              std::array<int64_t, 2> kernel_size, Activation activation = Activation::kNone,
              const Conv2DOptions& options = {});

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> pool_size, std::array<int64_t, 2> strides,
                  Padding padding = Padding::kValid);
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> pool_size, std::array<int64_t, 2> strides,
                  Padding padding = Padding::kValid);
// [N, ...] -> [N, prod(...)].
Tensor flatten(const Tensor& x);
// Identity unless training.
Tensor dropout(const Tensor& x, double rate, bool training);

struct BatchNormOptions {
  double momentum = 0.99;  // moving = moving * momentum + batch * (1 - momentum)
  double epsilon = 1e-3;
  bool center = true;  // learn beta
  bool scale = true;   // learn gamma
};

// Normalises over every axis but the last. In training, uses the batch's statistics and
// updates name/moving_mean and name/moving_variance; otherwise uses those. Variables
// name/gamma and name/beta are learned.
Tensor batch_norm(const std::string& name, const Tensor& x, bool training,
                  const BatchNormOptions& options = {});

// batch_norm whose training statistics cover the global batch: summed over the replicas of
// a multi-replica step (tf.keras's SyncBatchNormalization, PyTorch's SyncBatchNorm), so
// that N replicas of batch B/N normalise as one device with batch B and their moving
// statistics stay identical. Outside a multi-replica step it is batch_norm.
Tensor sync_batch_norm(const std::string& name, const Tensor& x, bool training,
                       const BatchNormOptions& options = {});
// Rows of the table name/embeddings [vocab_size, dim] for integer ids of any shape: ids'
// shape + [dim]. Its gradient is sparse (the rows looked up).
Tensor embedding(const std::string& name, const Tensor& ids, int64_t vocab_size, int64_t dim,
                 const Initializer& initializer = initializers::random_uniform(-0.05, 0.05));

}  // namespace cadre::nn
