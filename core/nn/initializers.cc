#include "cadre/nn/initializers.h"

#include <cmath>

#include "cadre/ops/random.h"

namespace cadre::nn::initializers {
namespace {

// Truncation to two standard deviations shrinks the spread by this factor.
constexpr double kTruncatedStddev = 0.87962566103423978;

struct Fans {
  double in, out;
};

Fans fans(const Shape& shape) {
  if (shape.rank() == 0) return {1, 1};
  if (shape.rank() == 1) return {double(shape[0]), double(shape[0])};
  double receptive = 1;
  for (int d = 0; d < shape.rank() - 2; ++d) receptive *= double(shape[d]);
  return {double(shape[shape.rank() - 2]) * receptive, double(shape[shape.rank() - 1]) * receptive};
}

}  // namespace

Initializer zeros() {
  return [](const Shape& s, DType d, Generator&) { return Tensor::zeros(s, d); };
}
Initializer ones() {
  return [](const Shape& s, DType d, Generator&) { return Tensor::ones(s, d); };
}
Initializer constant(double value) {
  return [value](const Shape& s, DType d, Generator&) { return Tensor::full(s, value, d); };
}
Initializer random_uniform(double lo, double hi) {
  return [lo, hi](const Shape& s, DType d, Generator& g) {
    return cadre::random_uniform(s, lo, hi, d, &g);
  };
}
Initializer random_normal(double mean, double stddev) {
  return [mean, stddev](const Shape& s, DType d, Generator& g) {
    return cadre::random_normal(s, mean, stddev, d, &g);
  };
}
Initializer truncated_normal(double mean, double stddev) {
  return [mean, stddev](const Shape& s, DType d, Generator& g) {
    return cadre::truncated_normal(s, mean, stddev, d, &g);
  };
}
Initializer glorot_uniform() {
  return [](const Shape& s, DType d, Generator& g) {
    Fans f = fans(s);
    double limit = std::sqrt(6.0 / std::max(1.0, f.in + f.out));
    return cadre::random_uniform(s, -limit, limit, d, &g);
  };
}
Initializer glorot_normal() {
  return [](const Shape& s, DType d, Generator& g) {
    Fans f = fans(s);
    double stddev = std::sqrt(2.0 / std::max(1.0, f.in + f.out)) / kTruncatedStddev;
    return cadre::truncated_normal(s, 0, stddev, d, &g);
  };
}
Initializer he_uniform() {
  return [](const Shape& s, DType d, Generator& g) {
    double limit = std::sqrt(6.0 / std::max(1.0, fans(s).in));
    return cadre::random_uniform(s, -limit, limit, d, &g);
  };
}
Initializer he_normal() {
  return [](const Shape& s, DType d, Generator& g) {
    double stddev = std::sqrt(2.0 / std::max(1.0, fans(s).in)) / kTruncatedStddev;
    return cadre::truncated_normal(s, 0, stddev, d, &g);
  };
}

}  // namespace cadre::nn::initializers
