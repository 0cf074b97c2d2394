// The Fashion-MNIST models of the examples and benchmarks, as functions of the input batch.
// Their variables come from the current VariableStore.
//   mlp: 784-256(relu)-256(relu)-10
//   mlp:N: 784-N(relu)-N(relu)-10, a dense model of any size (mlp:12985 holds 2 GiB of
//        variables and Adam slots: the MultiWorkerMirrored rows of docs/BENCHMARKS.md#scale)
//   cnn: conv 32 3x3 relu, max-pool 2, conv 64 3x3 relu, max-pool 2, flatten, dense 128 relu,
//        dense 10
#pragma once

#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre::examples {

// images: float32 [N, 784] scaled to [0, 1]; returns logits [N, 10].
Tensor mlp_logits(const Tensor& images, int64_t units = 256);
Tensor cnn_logits(const Tensor& images);
// By name ("mlp", "mlp:N" or "cnn"); throws InvalidArgumentError naming the valid ones otherwise.
Tensor model_logits(const std::string& model, const Tensor& images);
void check_model_name(const std::string& model);

}  // namespace cadre::examples
