#include "cadre/nn/clipping.h"

#include <cmath>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::nn {

double global_norm(const std::vector<Gradient>& gradients) {
  NoGradScope no_grad;
  double total = 0;
  for (const Gradient& g : gradients) {
    if (!g.defined()) continue;
    const Tensor& values = g.is_sparse() ? g.sparse().values : g.dense();
    total += sum(square(cast(values, DType::kFloat64))).item<double>();
  }
  return std::sqrt(total);
}

double clip_by_global_norm(std::vector<Gradient>& gradients, double clip_norm) {
  if (clip_norm <= 0) {
    throw InvalidArgumentError(
        str_cat("clip_by_global_norm: clip_norm must be positive, got ", clip_norm));
  }
  double norm = global_norm(gradients);
  if (!std::isfinite(norm) || norm <= clip_norm) return norm;
  double scale = clip_norm / norm;
  NoGradScope no_grad;
  for (Gradient& g : gradients) {
    if (!g.defined()) continue;
    if (g.is_sparse()) {
      IndexedSlices s = g.sparse();
      s.values = mul(s.values, scalar_like(s.values, scale));
      g = s;
    } else {
      g = mul(g.dense(), scalar_like(g.dense(), scale));
    }
  }
  return norm;
}

}  // namespace cadre::nn
