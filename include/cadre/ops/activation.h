// Activation functions, applied by themselves (cadre/ops/math.h) or fused into matmul,
// conv2d and the dense layers.
#pragma once

namespace cadre {

enum class Activation { kNone, kRelu, kSigmoid, kTanh, kGelu, kElu, kLeakyRelu, kSoftplus };

}  // namespace cadre
