// What several families of the built-in layers share: activations by their Keras names,
// and the integer lists of a layer's config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cadre/ops/activation.h"
#include "cadre/tensor/tensor.h"

namespace cadre::keras::internal {

// Throws InvalidArgumentError for an activation Keras does not know, listing those it does.
void check_activation(const std::string& name);
// The activation a fused kernel applies for `name` (kNone for linear, softmax and unknown).
cadre::Activation fused_activation(const std::string& name);
// Applies a Keras activation to pre-activations z, keeping them as logits for a final
// softmax or sigmoid.
Tensor activate_named(const Tensor& z, const std::string& name, Tensor* logits);
// A list of integers in a layer's config ("3,3").
std::string int_list(const std::vector<int64_t>& values);

}  // namespace cadre::keras::internal
