// CUDA activation kernels, their gradients, and the fused bias-and-activation gradient of a
// dense layer.
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/elementwise_ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linalg.h"
#include "core/kernels/reduction.h"

namespace cadre::backend::cuda {
namespace {

using kernels::Activation;
using portable::make_offsets;

void activation(Activation act, double alpha, const Tensor& x, Tensor& y) {
  DeviceGuard guard(y.device());
  visit_float_dtype(x.dtype(), "activation", [&]<typename T>() {
    for_each(y.device(), y.numel(),
             portable::ActivationElement<T>{ptr<T>(x), mut<T>(y), act, static_cast<T>(alpha),
                                            make_offsets<2>({&y, &x})},
             "activation");
  });
}

void activation_grad(Activation act, double alpha, const Tensor& saved, const Tensor& dy,
                     Tensor& dx) {
  DeviceGuard guard(dx.device());
  visit_float_dtype(saved.dtype(), "activation_grad", [&]<typename T>() {
    for_each(dx.device(), dx.numel(),
             portable::ActivationGradElement<T>{ptr<T>(saved), ptr<T>(dy), mut<T>(dx), act,
                                                static_cast<T>(alpha),
                                                make_offsets<3>({&dx, &saved, &dy})},
             "activation_grad");
  });
}

// dz = dy * act'(y) over [rows, N]; db = the column sums of dz.
void bias_activation_grad(Activation act, double alpha, const Tensor& y, const Tensor& dy,
                          Tensor& dz, Tensor& db) {
  DeviceGuard guard(dz.device());
  activation_grad(act, alpha, y, dy, dz);
  if (db.defined()) {
    int64_t rows = dy.shape()[0], cols = dy.shape()[1];
    reduce_3d(kernels::ReduceOp::kSum, dz.device(), dz.dtype(), dz.raw_data(), 1, rows, cols,
              db.raw_data());
  }
}

}  // namespace

void register_activation_kernels() {
  kernels::activation.set(DeviceType::kGPU, &activation);
  kernels::activation_grad.set(DeviceType::kGPU, &activation_grad);
  kernels::bias_activation_grad.set(DeviceType::kGPU, &bias_activation_grad);
}

}  // namespace cadre::backend::cuda
