// The built-in initializers. Each is a BuiltInInitializer, which says what it draws for a
// shape, so that initial_fill (core/nn/initial_fill.h) can describe a variable's value without
// building it; any other function is opaque and only running it tells.
#include "cadre/nn/initializers.h"

#include <algorithm>
#include <cmath>

#include "cadre/ops/random.h"
#include "core/nn/initial_fill.h"

namespace cadre::nn {
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

// Variance scaling takes a kind's parameters from the shape's fans instead of fixed ones.
enum class InitializerScaling { kNone, kGlorot, kHe };

struct BuiltInInitializer {
  InitialFill::Kind kind = InitialFill::Kind::kConstant;
  double a = 0, b = 0;
  InitializerScaling scaling = InitializerScaling::kNone;

  InitialFill parameters(const Shape& shape) const {
    if (scaling == InitializerScaling::kNone) return {kind, a, b, {}};
    Fans f = fans(shape);
    double fan = scaling == InitializerScaling::kGlorot ? f.in + f.out : f.in;
    if (kind == InitialFill::Kind::kUniform) {
      double limit = std::sqrt(6.0 / std::max(1.0, fan));
      return {kind, -limit, limit, {}};
    }
    return {kind, 0, std::sqrt(2.0 / std::max(1.0, fan)) / kTruncatedStddev, {}};
  }

  Tensor operator()(const Shape& shape, DType dtype, Generator& generator) const {
    InitialFill f = parameters(shape);
    switch (kind) {
      case InitialFill::Kind::kConstant:
        return Tensor::full(shape, f.a, dtype);
      case InitialFill::Kind::kUniform:
        return cadre::random_uniform(shape, f.a, f.b, dtype, &generator);
      case InitialFill::Kind::kNormal:
        return cadre::random_normal(shape, f.a, f.b, dtype, &generator);
      case InitialFill::Kind::kTruncatedNormal:
        return cadre::truncated_normal(shape, f.a, f.b, dtype, &generator);
    }
    return Tensor();
  }
};

// Whether a draw would accept `fill`'s parameters and `dtype` (cadre/ops/random.h's checks).
bool drawable(const InitialFill& fill, DType dtype) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) return false;
  return fill.kind == InitialFill::Kind::kUniform ? fill.a < fill.b : fill.b >= 0;
}

}  // namespace

std::optional<InitialFill> initial_fill(const VariableSpec& spec, uint64_t seed) {
  const BuiltInInitializer zeros;  // default_variable_creator's value without an initializer
  const BuiltInInitializer* built_in =
      spec.initializer ? spec.initializer.target<BuiltInInitializer>() : &zeros;
  if (built_in == nullptr) return std::nullopt;
  InitialFill fill = built_in->parameters(spec.shape);
  if (fill.kind == InitialFill::Kind::kConstant) return fill;
  if (!drawable(fill, spec.dtype)) return std::nullopt;
  // default_variable_creator's generator is fresh: the initializer's one draw starts at its
  // stream's block 0.
  fill.key = Generator(seed, stream_for_name(spec.name)).reserve(0);
  return fill;
}

namespace initializers {

using Kind = InitialFill::Kind;

Initializer zeros() { return BuiltInInitializer{Kind::kConstant, 0}; }
Initializer ones() { return BuiltInInitializer{Kind::kConstant, 1}; }
Initializer constant(double value) { return BuiltInInitializer{Kind::kConstant, value}; }
Initializer random_uniform(double lo, double hi) {
  return BuiltInInitializer{Kind::kUniform, lo, hi};
}
Initializer random_normal(double mean, double stddev) {
  return BuiltInInitializer{Kind::kNormal, mean, stddev};
}
Initializer truncated_normal(double mean, double stddev) {
  return BuiltInInitializer{Kind::kTruncatedNormal, mean, stddev};
}
Initializer glorot_uniform() {
  return BuiltInInitializer{Kind::kUniform, 0, 0, InitializerScaling::kGlorot};
}
Initializer glorot_normal() {
  return BuiltInInitializer{Kind::kTruncatedNormal, 0, 0, InitializerScaling::kGlorot};
}
Initializer he_uniform() {
  return BuiltInInitializer{Kind::kUniform, 0, 0, InitializerScaling::kHe};
}
Initializer he_normal() {
  return BuiltInInitializer{Kind::kTruncatedNormal, 0, 0, InitializerScaling::kHe};
}

}  // namespace initializers
}  // namespace cadre::nn
