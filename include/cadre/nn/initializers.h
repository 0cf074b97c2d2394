// Variable initializers, with TensorFlow 2's definitions. An initializer draws from the
// generator it is given; the variable store seeds that generator from its seed and the
// variable's full name, so initial values do not depend on creation order or on which
// replica creates the variable.
#pragma once

#include <functional>

#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre::nn {

using Initializer = std::function<Tensor(const Shape& shape, DType dtype, Generator& generator)>;

namespace initializers {

Initializer zeros();
Initializer ones();
Initializer constant(double value);
Initializer random_uniform(double lo = -0.05, double hi = 0.05);
Initializer random_normal(double mean = 0, double stddev = 0.05);
Initializer truncated_normal(double mean = 0, double stddev = 0.05);
// Variance scaling: fans from the shape ([in, out] for dense, [KH, KW, in, out] for conv).
Initializer glorot_uniform();  // U(-l, l), l = sqrt(6 / (fan_in + fan_out)); dense default
Initializer glorot_normal();   // truncated normal, stddev sqrt(2 / (fan_in + fan_out)) / .8796
Initializer he_uniform();      // l = sqrt(6 / fan_in)
Initializer he_normal();       // truncated normal, stddev sqrt(2 / fan_in) / .8796

}  // namespace initializers
}  // namespace cadre::nn
