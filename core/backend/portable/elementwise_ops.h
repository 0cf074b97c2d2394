// Per-element bodies of the CUDA elementwise kernels: each functor computes output element
// i. The GPU runs them in grid-stride loops (core/backend/cuda/elementwise_kernels.cu); the
// host tests run the very same functors in a plain loop against the CPU kernels.
#pragma once

#include <cstdint>

#include "core/backend/portable/offsets.h"
#include "core/backend/portable/op_math.h"

namespace cadre::backend::portable {

// out[i] = value; W is the unsigned word of the element size.
template <typename W>
struct FillElement {
  W* out;
  W value;
  Offsets<1> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const { out[at.get0(i)] = value; }
};

// dst = src, both any strides. Operands: [dst, src].
template <typename W>
struct CopyElement {
  const W* src;
  W* dst;
  Offsets<2> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    at.get(i, o);
    dst[o[0]] = src[o[1]];
  }
};

// Operands: [dst, src].
template <typename From, typename To>
struct CastElement {
  const From* src;
  To* dst;
  Offsets<2> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    at.get(i, o);
    dst[o[0]] = convert<To>(src[o[1]]);
  }
};

// Operands: [out, x]. R is T, or bool for predicates.
template <typename T, typename R>
struct UnaryElement {
  const T* x;
  R* out;
  UnaryOp op;
  Offsets<2> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    at.get(i, o);
    if constexpr (std::is_same_v<R, bool> && !std::is_same_v<T, bool>) {
      out[o[0]] = unary_predicate(op, x[o[1]]);
    } else if constexpr (std::is_same_v<T, bool>) {
      out[o[0]] = unary_predicate(op, x[o[1]]);
    } else {
      out[o[0]] = unary_value(op, x[o[1]]);
    }
  }
};

// Operands: [out, a, b]. R is bool for comparisons and logical ops, else T.
template <typename T, typename R>
struct BinaryElement {
  const T* a;
  const T* b;
  R* out;
  BinaryOp op;
  Offsets<3> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[3];
    at.get(i, o);
    if constexpr (std::is_same_v<R, bool>) {
      out[o[0]] = compare_value(op, a[o[1]], b[o[2]]);
    } else {
      out[o[0]] = binary_value(op, a[o[1]], b[o[2]]);
    }
  }
};

// Operands: [out, cond, a, b].
template <typename T>
struct WhereElement {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  Offsets<4> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[4];
    at.get(i, o);
    out[o[0]] = cond[o[1]] ? a[o[2]] : b[o[3]];
  }
};

// Operands: [out, x].
template <typename T>
struct ClipElement {
  const T* x;
  T* out;
  T lo, hi;
  Offsets<2> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    at.get(i, o);
    out[o[0]] = clip_value(x[o[1]], lo, hi);
  }
};

// Operands: [y, x].
template <typename T>
struct ActivationElement {
  const T* x;
  T* y;
  Activation act;
  T alpha;
  Offsets<2> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[2];
    at.get(i, o);
    y[o[0]] = activation_value(act, alpha, x[o[1]]);
  }
};

// Operands: [dx, saved, dy].
template <typename T>
struct ActivationGradElement {
  const T* saved;
  const T* dy;
  T* dx;
  Activation act;
  T alpha;
  Offsets<3> at;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t o[3];
    at.get(i, o);
    dx[o[0]] = activation_grad_value(act, alpha, saved[o[1]], dy[o[2]]);
  }
};

// out = act(out + bias[i % cols]) over contiguous rows: the matmul epilogue when it is not
// fused into cuBLASLt.
template <typename T>
struct BiasActivationElement {
  T* out;
  const T* bias;  // may be null
  int64_t cols;
  Activation act;
  T alpha;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    T z = out[i] + (bias != nullptr ? bias[i % cols] : T(0));
    out[i] = activation_value(act, alpha, z);
  }
};

}  // namespace cadre::backend::portable
