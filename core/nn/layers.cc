#include "cadre/nn/layers.h"

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/cross_replica.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::nn {
namespace {

int64_t last_dim(const char* layer, const std::string& name, const Tensor& x) {
  if (!x.defined() || x.rank() < 1) {
    throw InvalidArgumentError(str_cat(layer, " '", name, "': expected an input of rank >= 1"));
  }
  return x.shape()[x.rank() - 1];
}

}  // namespace

Tensor dense(const std::string& name, const Tensor& x, int64_t units, Activation activation,
             const DenseOptions& options) {
  int64_t in = last_dim("dense", name, x);
  if (units <= 0) throw InvalidArgumentError(str_cat("dense '", name, "': units must be positive"));
  NameScope scope(name);
  Variable& kernel =
      get_variable("kernel", Shape{in, units}, options.kernel_initializer, x.dtype());
  Tensor bias;
  if (options.use_bias) {
    bias = get_variable("bias", Shape{units}, options.bias_initializer, x.dtype()).read();
  }
  return cadre::linear(x, kernel.read(), bias, activation);
}

Tensor conv2d(const std::string& name, const Tensor& x, int64_t filters,
              std::array<int64_t, 2> kernel_size, Activation activation,
              const Conv2DOptions& options) {
  int64_t in = last_dim("conv2d", name, x);
  if (filters <= 0)
    throw InvalidArgumentError(str_cat("conv2d '", name, "': filters must be positive"));
  NameScope scope(name);
  Variable& kernel = get_variable("kernel", Shape{kernel_size[0], kernel_size[1], in, filters},
                                  options.kernel_initializer, x.dtype());
  Tensor bias;
  if (options.use_bias) {
    bias = get_variable("bias", Shape{filters}, options.bias_initializer, x.dtype()).read();
  }
  return cadre::conv2d(x, kernel.read(), bias, options.strides, options.padding, options.dilations,
                       activation);
}

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> pool_size, std::array<int64_t, 2> strides,
                  Padding padding) {
  return cadre::max_pool2d(x, pool_size, strides, padding);
}

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> pool_size, std::array<int64_t, 2> strides,
                  Padding padding) {
  return cadre::avg_pool2d(x, pool_size, strides, padding);
}

Tensor flatten(const Tensor& x) { return cadre::flatten(x); }

Tensor dropout(const Tensor& x, double rate, bool training) {
  return training ? cadre::dropout(x, rate) : x;
}

namespace {

// A batch-norm layer's variables, created on first use under `name`.
struct BatchNormVariables {
  Tensor gamma, beta;
  Variable* moving_mean;
  Variable* moving_variance;
};

BatchNormVariables batch_norm_variables(int64_t channels, const Tensor& x,
                                        const BatchNormOptions& options) {
  DType dtype = x.dtype();
  BatchNormVariables v;
  v.gamma = options.scale
                ? get_variable("gamma", Shape{channels}, initializers::ones(), dtype).read()
                : Tensor::ones(Shape{channels}, dtype, x.device());
  v.beta = options.center
               ? get_variable("beta", Shape{channels}, initializers::zeros(), dtype).read()
               : Tensor::zeros(Shape{channels}, dtype, x.device());
  VariableSpec spec;
  spec.shape = Shape{channels};
  spec.dtype = dtype;
  spec.trainable = false;
  spec.aggregation = Aggregation::kMean;
  spec.synchronization = Synchronization::kOnRead;
  spec.name = scoped_name("moving_mean");
  spec.initializer = initializers::zeros();
  v.moving_mean = &current_store().get_or_create(spec);
  spec.name = scoped_name("moving_variance");
  spec.initializer = initializers::ones();
  v.moving_variance = &current_store().get_or_create(spec);
  return v;
}

// `rows` (a [1] tensor, when given): the examples the statistics cover; with none they are
// not folded in (read on the device, not the host: no wait for the step's kernels).
void update_moving(BatchNormVariables& v, const Tensor& mean, const Tensor& variance,
                   const BatchNormOptions& options, const Tensor& rows = Tensor()) {
  // With variables shared by the replicas, one replica updates them (plain batch_norm: with
  // its own batch's statistics; sync_batch_norm: the global ones, the same everywhere).
  if (!updates_variables_here()) return;
  NoGradScope no_grad;
  double m = options.momentum;
  // Keras folds the batch variance in as computed (biased). read(): the compute device.
  if (!rows.defined()) {
    v.moving_mean->assign(v.moving_mean->read() * m + mean * (1 - m));
    v.moving_variance->assign(v.moving_variance->read() * m + variance * (1 - m));
    return;
  }
  // 1 with rows, else 0: the same products as above with rows, and the old value without.
  Tensor some = minimum(rows, Tensor::ones(rows.shape(), rows.dtype(), rows.device()));
  Tensor keep = some * m + (1 - some), take = some * (1 - m);
  v.moving_mean->assign(v.moving_mean->read() * keep + mean * take);
  v.moving_variance->assign(v.moving_variance->read() * keep + variance * take);
}

}  // namespace

Tensor batch_norm(const std::string& name, const Tensor& x, bool training,
                  const BatchNormOptions& options) {
  int64_t channels = last_dim("batch_norm", name, x);
  NameScope scope(name);
  BatchNormVariables v = batch_norm_variables(channels, x, options);
  if (!training) {
    return batch_norm_inference(x, v.gamma, v.beta, v.moving_mean->read(),
                                v.moving_variance->read(), options.epsilon);
  }
  BatchNormResult r = batch_norm_training(x, v.gamma, v.beta, options.epsilon);
  // A batch with no rows has no statistics to fold in.
  if (x.numel() > 0) update_moving(v, r.batch_mean, r.batch_variance, options);
  return r.y;
}

Tensor sync_batch_norm(const std::string& name, const Tensor& x, bool training,
                       const BatchNormOptions& options) {
  ReplicaCollective* collective = current_replica_collective();
  if (!training || collective == nullptr || collective->num_replicas() == 1) {
    return batch_norm(name, x, training, options);
  }
  int64_t channels = last_dim("sync_batch_norm", name, x);
  NameScope scope(name);
  BatchNormVariables v = batch_norm_variables(channels, x, options);
  std::vector<int> axes;
  for (int a = 0; a + 1 < x.rank(); ++a) axes.push_back(a);
  Tensor count =
      Tensor::full(Shape{1}, static_cast<double>(x.numel() / channels), x.dtype(), x.device());
  // One collective for the sums, the sums of squares and the examples of every replica.
  Tensor global = cross_replica_sum(concat({sum(x, axes), sum(square(x), axes), count}, 0));
  Tensor n = slice(global, 0, 2 * channels, 2 * channels + 1);
  // At least 1: replicas whose worker's input has ended have no rows (their sums are 0).
  Tensor divisor = maximum(n, Tensor::ones(n.shape(), n.dtype(), n.device()));
  Tensor mean = slice(global, 0, 0, channels) / divisor;
  Tensor variance = slice(global, 0, channels, 2 * channels) / divisor - square(mean);
  Tensor output = (x - mean) * rsqrt(variance + options.epsilon) * v.gamma + v.beta;
  update_moving(v, mean, variance, options, n);
  return output;
}
Tensor embedding(const std::string& name, const Tensor& ids, int64_t vocab_size, int64_t dim,
                 const Initializer& initializer) {
  if (vocab_size <= 0 || dim <= 0) {
    throw InvalidArgumentError(
        str_cat("embedding '", name, "': vocab_size and dim must be positive"));
  }
  NameScope scope(name);
  VariableSpec spec;
  spec.name = scoped_name("embeddings");
  spec.shape = Shape{vocab_size, dim};
  spec.initializer = initializer;
  spec.row_access = true;
  Variable& table = current_store().get_or_create(spec);
  return gather(table.read_rows(ids), ids, 0);
}

}  // namespace cadre::nn
