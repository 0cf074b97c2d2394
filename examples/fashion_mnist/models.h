// The Fashion-MNIST models of the examples and benchmarks, as functions of the input batch.
// Their variables come from the current VariableStore.
//   mlp: 784-256(relu)-256(relu)-10
//   cnn: conv 32 3x3 relu, max-pool 2, conv 64 3x3 relu, max-pool 2, flatten, dense 128 relu,
//        dense 10
#pragma once

#include <string>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre::examples {

// images: float32 [N, 784] scaled to [0, 1]; returns logits [N, 10].
Tensor mlp_logits(const Tensor& images);
Tensor cnn_logits(const Tensor& images);
// By name ("mlp" or "cnn"); throws InvalidArgumentError naming the valid ones otherwise.
Tensor model_logits(const std::string& model, const Tensor& images);
void check_model_name(const std::string& model);

}  // namespace cadre::examples
