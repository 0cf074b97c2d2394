// CUDA 2-D max and average pooling over NHWC images: one thread per output element
// forward, one per input element backward (gathering the windows that cover it, so no two
// threads write one element). Bodies in core/backend/portable/conv_ops.h.
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/conv_ops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cuda {
namespace {

using kernels::Pool2DParams;

void pool2d(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2DParams& p) {
  DeviceGuard guard(y.device());
  portable::PoolGeometry g = portable::pool_geometry(x.shape(), y.shape(), p);
  int32_t* arg = argmax.defined() ? mut<int32_t>(argmax) : nullptr;
  visit_float_dtype(x.dtype(), "pool2d", [&]<typename T>() {
    for_each(y.device(), y.numel(), portable::PoolElement<T>{ptr<T>(x), mut<T>(y), arg, g},
             "pool2d");
  });
}

void pool2d_grad(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2DParams& p) {
  DeviceGuard guard(dx.device());
  portable::PoolGeometry g = portable::pool_geometry(dx.shape(), dy.shape(), p);
  const int32_t* arg = argmax.defined() ? ptr<int32_t>(argmax) : nullptr;
  visit_float_dtype(dy.dtype(), "pool2d_grad", [&]<typename T>() {
    for_each(dx.device(), dx.numel(), portable::PoolGradElement<T>{ptr<T>(dy), arg, mut<T>(dx), g},
             "pool2d_grad");
  });
}

}  // namespace

void register_pool_kernels() {
  kernels::pool2d.set(DeviceType::kGPU, &pool2d);
  kernels::pool2d_grad.set(DeviceType::kGPU, &pool2d_grad);
}

}  // namespace cadre::backend::cuda
