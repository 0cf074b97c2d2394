// Neural-network ops: softmax, fused cross-entropies, convolution, pooling, batch
// normalization and dropout. Images are NHWC; convolution kernels are [KH, KW, in, out],
// as in TensorFlow.
#pragma once

#include <array>
#include <string>

#include "cadre/ops/activation.h"
#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

// Along `axis` (default the last).
Tensor softmax(const Tensor& logits, int axis = -1);
Tensor log_softmax(const Tensor& logits, int axis = -1);

// Per-example losses, numerically stable, with fused gradients.
// labels: int32/int64 [N] in [0, C); logits [N, C] -> [N]. A label outside [0, C) is an
// InvalidArgumentError naming it.
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// labels: a distribution per row, logits' shape [N, C] -> [N].
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// Elementwise: max(x, 0) - x * z + log(1 + exp(-|x|)).
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

enum class Padding { kValid, kSame };
Padding parse_padding(const std::string& name);  // "VALID" or "SAME", any case

// x [N, H, W, C], filters [KH, KW, C, O], bias [O] or undefined -> [N, OH, OW, O], with the
// activation fused when the backend can (relu).
Tensor conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
              std::array<int64_t, 2> strides = {1, 1}, Padding padding = Padding::kValid,
              std::array<int64_t, 2> dilations = {1, 1}, Activation activation = Activation::kNone);
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> window, std::array<int64_t, 2> strides,
                  Padding padding = Padding::kValid);
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> window, std::array<int64_t, 2> strides,
                  Padding padding = Padding::kValid);

// Batch normalization over every axis but the last (channels). In training it normalises
// with the batch's statistics and returns them (mean, biased variance) for the caller to
// fold into moving averages; in inference it uses the given statistics.
struct BatchNormResult {
  Tensor y;
  Tensor batch_mean;      // training only
  Tensor batch_variance;  // training only
};
BatchNormResult batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon);
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon);

// Zeroes each element with probability `rate` and scales the others by 1/(1-rate), with
// randomness from `generator` (the current one when null).
Tensor dropout(const Tensor& x, double rate, Generator* generator = nullptr);

}  // namespace cadre
