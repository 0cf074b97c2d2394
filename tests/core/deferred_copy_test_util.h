// What the deferred-copy tests share: float32 values to update, and a fused CPU Adam update
// with copies beside the same update without them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "cadre/tensor/tensor.h"
#include "core/kernels/optimizer.h"
#include "core/nn/deferred_copy.h"

namespace cadre::testing {

inline std::vector<float> floats_of(const Tensor& t) { return t.contiguous().to_vector<float>(); }

// n float32 values base + 0.001 * (i % period): a pattern no chunk of a kernel lines up with.
inline Tensor sawtooth(int64_t n, double base, int64_t period) {
  Tensor t = Tensor::empty(Shape{n}, DType::kFloat32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(base + 0.001 * (i % period));
  return t;
}

// One fused CPU Adam update of w, m and v by g that copies `outs` out as it goes; returns the
// w, m and v the same update makes of their old values without copies.
inline std::array<Tensor, 3> adam_with_copies(const Tensor& w, const Tensor& g, const Tensor& m,
                                              const Tensor& v,
                                              const std::vector<nn::CopyOut>& outs) {
  std::vector<Tensor> plain_w{w.clone()}, plain_m{m.clone()}, plain_v{v.clone()};
  std::vector<Tensor> vars{w}, grads{g}, ms{m}, vs{v};
  kernels::AdamParams copying{0.01, 0.9, 0.999, 1e-7, outs};
  kernels::adam_update.get(Device::cpu(0))(vars, grads, ms, vs, copying);
  kernels::AdamParams plain{0.01, 0.9, 0.999, 1e-7};
  kernels::adam_update.get(Device::cpu(0))(plain_w, grads, plain_m, plain_v, plain);
  return {plain_w[0], plain_m[0], plain_v[0]};
}

}  // namespace cadre::testing
