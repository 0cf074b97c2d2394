// The API's Activation (cadre/ops/activation.h) as the kernels name it
// (core/kernels/elementwise.h): the kernels layer lies below the ops that define the API.
#pragma once

#include "cadre/ops/activation.h"
#include "core/kernels/elementwise.h"

namespace cadre {

constexpr kernels::Activation kernel_activation(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return kernels::Activation::kNone;
    case Activation::kRelu:
      return kernels::Activation::kRelu;
    case Activation::kSigmoid:
      return kernels::Activation::kSigmoid;
    case Activation::kTanh:
      return kernels::Activation::kTanh;
    case Activation::kGelu:
      return kernels::Activation::kGelu;
    case Activation::kElu:
      return kernels::Activation::kElu;
    case Activation::kLeakyRelu:
      return kernels::Activation::kLeakyRelu;
    case Activation::kSoftplus:
      return kernels::Activation::kSoftplus;
  }
  return kernels::Activation::kNone;
}

}  // namespace cadre
