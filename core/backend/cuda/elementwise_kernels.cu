// CUDA elementwise kernels: fill, copy, cast, unary and binary math, where, clip, and the
// matmul epilogue. Operands of any strides (broadcast views included) through
// portable::Offsets; the per-element bodies are in core/backend/portable/.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "core/backend/cuda/dispatch.h"
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/elementwise_ops.h"
#include "core/kernels/elementwise.h"

namespace cadre::backend::cuda {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;
using portable::make_offsets;

// The bit pattern of `value` stored as `dtype`, as the CPU's fill converts it.
uint64_t bits_of(double value, DType dtype) {
  uint64_t bits = 0;
  auto store = [&bits](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case DType::kFloat32:
      store(static_cast<float>(value));
      break;
    case DType::kFloat64:
      store(value);
      break;
    case DType::kInt32:
      store(static_cast<int32_t>(value));
      break;
    case DType::kInt64:
      store(static_cast<int64_t>(value));
      break;
    case DType::kUInt8:
      store(static_cast<uint8_t>(value));
      break;
    case DType::kBool:
      store(static_cast<uint8_t>(value != 0));
      break;
    case DType::kBFloat16:
      store(BFloat16(static_cast<float>(value)).bits);
      break;
    case DType::kFloat16:
      store(Float16(static_cast<float>(value)).bits);
      break;
  }
  return bits;
}

void fill(Tensor& out, double value) {
  DeviceGuard guard(out.device());
  uint64_t bits = bits_of(value, out.dtype());
  visit_storage_word(out.dtype(), [&]<typename W>() {
    W word;
    std::memcpy(&word, &bits, sizeof word);
    for_each(out.device(), out.numel(),
             portable::FillElement<W>{mut<W>(out), word, make_offsets<1>({&out})}, "fill");
  });
}

void copy(const Tensor& src, Tensor& dst) {
  DeviceGuard guard(dst.device());
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.nbytes() > 0 && src.raw_data() != dst.raw_data()) {
      check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice,
                            stream_of(dst.device())),
            "cudaMemcpyAsync (copy)");
    }
    return;
  }
  visit_storage_word(src.dtype(), [&]<typename W>() {
    for_each(dst.device(), dst.numel(),
             portable::CopyElement<W>{ptr<W>(src), mut<W>(dst), make_offsets<2>({&dst, &src})},
             "copy");
  });
}

void cast(const Tensor& src, Tensor& dst) {
  DeviceGuard guard(dst.device());
  visit_storage(src.dtype(), [&]<typename From>() {
    visit_storage(dst.dtype(), [&]<typename To>() {
      for_each(dst.device(), dst.numel(),
               portable::CastElement<From, To>{ptr<From>(src), mut<To>(dst),
                                               make_offsets<2>({&dst, &src})},
               "cast");
    });
  });
}

void unary(UnaryOp op, const Tensor& x, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_dtype(x.dtype(), "unary op", [&]<typename T>() {
    if (!portable::unary_defined<T>(op)) {
      throw_unsupported_dtype("unary op", x.dtype(), "a dtype the op is defined for");
    }
    auto at = make_offsets<2>({&out, &x});
    if (portable::unary_is_predicate(op)) {
      for_each(out.device(), out.numel(),
               portable::UnaryElement<T, bool>{ptr<T>(x), mut<bool>(out), op, at}, "unary op");
    } else if constexpr (!std::is_same_v<T, bool>) {
      for_each(out.device(), out.numel(),
               portable::UnaryElement<T, T>{ptr<T>(x), mut<T>(out), op, at}, "unary op");
    }
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_dtype(a.dtype(), "binary op", [&]<typename T>() {
    if (!portable::binary_defined<T>(op)) {
      throw_unsupported_dtype("binary op", a.dtype(), "a dtype the op is defined for");
    }
    auto at = make_offsets<3>({&out, &a, &b});
    if (portable::binary_is_comparison(op) || portable::binary_is_logical(op)) {
      for_each(out.device(), out.numel(),
               portable::BinaryElement<T, bool>{ptr<T>(a), ptr<T>(b), mut<bool>(out), op, at},
               "binary op");
    } else if constexpr (!std::is_same_v<T, bool>) {
      for_each(out.device(), out.numel(),
               portable::BinaryElement<T, T>{ptr<T>(a), ptr<T>(b), mut<T>(out), op, at},
               "binary op");
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_dtype(a.dtype(), "where", [&]<typename T>() {
    for_each(out.device(), out.numel(),
             portable::WhereElement<T>{ptr<bool>(cond), ptr<T>(a), ptr<T>(b), mut<T>(out),
                                       make_offsets<4>({&out, &cond, &a, &b})},
             "where");
  });
}

void clip(const Tensor& x, double lo, double hi, Tensor& out) {
  DeviceGuard guard(out.device());
  visit_dtype(x.dtype(), "clip_by_value", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("clip_by_value", x.dtype(), "a numeric dtype");
    } else {
      for_each(out.device(), out.numel(),
               portable::ClipElement<T>{ptr<T>(x), mut<T>(out), static_cast<T>(lo),
                                        static_cast<T>(hi), make_offsets<2>({&out, &x})},
               "clip_by_value");
    }
  });
}

}  // namespace

void bias_activation_epilogue(Tensor& out, const Tensor& bias, kernels::Activation act,
                              double alpha) {
  int64_t cols = out.shape()[out.rank() - 1];
  visit_float_dtype(out.dtype(), "matmul", [&]<typename T>() {
    const T* b = bias.defined() ? ptr<T>(bias) : nullptr;
    for_each(out.device(), out.numel(),
             portable::BiasActivationElement<T>{mut<T>(out), b, cols, act, static_cast<T>(alpha)},
             "matmul epilogue");
  });
}

void register_elementwise_kernels() {
  constexpr DeviceType kGpu = DeviceType::kGPU;
  kernels::fill.set(kGpu, &fill);
  kernels::copy.set(kGpu, &copy);
  kernels::cast.set(kGpu, &cast);
  kernels::unary.set(kGpu, &unary);
  kernels::binary.set(kGpu, &binary);
  kernels::where.set(kGpu, &where);
  kernels::clip.set(kGpu, &clip);
}

}  // namespace cadre::backend::cuda
