// CUDA random kernels: the CPU generator's Philox streams element for element (bodies in
// core/backend/portable/random_ops.h), one thread per counter block. Compiled with
// --fmad=false, as every CUDA source (see CMakeLists.txt), so that the float arithmetic
// rounds as on the host.
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/random_ops.h"
#include "core/kernels/random.h"

namespace cadre::backend::cuda {
namespace {

using kernels::RandomDistribution;

void random(RandomDistribution dist, double a, double b, PhiloxKey key, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_float_dtype(out.dtype(), "random", [&]<typename T>() {
    T* p = mut<T>(out);
    int64_t n = out.numel();
    Device device = out.device();
    switch (dist) {
      case RandomDistribution::kUniform:
        for_each(device, (n + 3) / 4, portable::UniformBlock<T>{p, n, key.key, key.offset, a, b},
                 "random_uniform");
        break;
      case RandomDistribution::kNormal:
        for_each(device, (n + 1) / 2, portable::NormalBlock<T>{p, n, key.key, key.offset, a, b},
                 "random_normal");
        break;
      case RandomDistribution::kTruncatedNormal:
        for_each(device, n, portable::TruncatedNormalElement<T>{p, key.key, key.offset, a, b},
                 "truncated_normal");
        break;
    }
  });
}

void dropout_mask(double rate, PhiloxKey key, Tensor& mask) {
  DeviceGuard guard(mask.device());
  visit_float_dtype(mask.dtype(), "dropout", [&]<typename T>() {
    int64_t n = mask.numel();
    for_each(
        mask.device(), (n + 3) / 4,
        portable::DropoutBlock<T>{mut<T>(mask), n, key.key, key.offset,
                                  static_cast<T>(1.0 / (1.0 - rate)), static_cast<float>(rate)},
        "dropout");
  });
}

}  // namespace

void register_random_kernels() {
  kernels::random.set(DeviceType::kGPU, &random);
  kernels::dropout_mask.set(DeviceType::kGPU, &dropout_mask);
}

}  // namespace cadre::backend::cuda
