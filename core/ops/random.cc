#include "cadre/ops/random.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/kernels/random.h"

namespace cadre {
namespace {

Tensor draw(kernels::RandomDistribution dist, const char* op, const Shape& shape, double a,
            double b, DType dtype, Generator* generator) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) {
    throw InvalidArgumentError(str_cat(op, ": dtype ", dtype, "; expected float32 or float64"));
  }
  Generator& gen = generator != nullptr ? *generator : current_generator();
  Tensor out = Tensor::empty(shape, dtype);
  PhiloxKey key = gen.reserve(kernels::philox_blocks(dist, shape.num_elements()));
  if (out.numel() > 0) kernels::random.call(out.device(), dist, a, b, key, out);
  return out;
}

}  // namespace

Tensor random_uniform(const Shape& shape, double lo, double hi, DType dtype, Generator* generator) {
  if (!(lo < hi)) {
    throw InvalidArgumentError(str_cat("random_uniform: need lo < hi, got [", lo, ", ", hi, ")"));
  }
  return draw(kernels::RandomDistribution::kUniform, "random_uniform", shape, lo, hi, dtype,
              generator);
}

Tensor random_normal(const Shape& shape, double mean, double stddev, DType dtype,
                     Generator* generator) {
  if (stddev < 0) throw InvalidArgumentError(str_cat("random_normal: negative stddev ", stddev));
  return draw(kernels::RandomDistribution::kNormal, "random_normal", shape, mean, stddev, dtype,
              generator);
}

Tensor truncated_normal(const Shape& shape, double mean, double stddev, DType dtype,
                        Generator* generator) {
  if (stddev < 0) {
    throw InvalidArgumentError(str_cat("truncated_normal: negative stddev ", stddev));
  }
  return draw(kernels::RandomDistribution::kTruncatedNormal, "truncated_normal", shape, mean,
              stddev, dtype, generator);
}

}  // namespace cadre
