// The elementwise ops on scalars, the one definition the CPU kernels (elementwise_kernels.cc,
// activation_kernels.cc) and the CUDA kernels both run: NaN propagation of maximum/minimum,
// floor division and modulo, rounding half to even, integer division by zero giving 0, the
// activations and their derivatives. The CPU kernels call them with the op a compile-time
// constant, so that the switch folds away inside their loops.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/backend/portable/scalar_math.h"
#include "core/kernels/elementwise.h"

namespace cadre::backend::portable {

// --- unary ops ---
using kernels::Activation;
using kernels::BinaryOp;
using kernels::UnaryOp;

// Ops whose result is bool whatever the input.
CADRE_HOST_DEVICE constexpr bool unary_is_predicate(UnaryOp op) {
  return op == UnaryOp::kIsNan || op == UnaryOp::kIsInf || op == UnaryOp::kIsFinite ||
         op == UnaryOp::kLogicalNot;
}

// Whether the CPU backend defines `op` for elements of type T (the same set here).
template <typename T>
constexpr bool unary_defined(UnaryOp op) {
  if constexpr (std::is_floating_point_v<T>) {
    return op != UnaryOp::kLogicalNot;
  } else if constexpr (std::is_same_v<T, bool>) {
    return op == UnaryOp::kLogicalNot;
  } else {
    return op == UnaryOp::kNeg || op == UnaryOp::kAbs || op == UnaryOp::kSign ||
           op == UnaryOp::kSquare;
  }
}

template <typename T>
CADRE_HOST_DEVICE inline T unary_value(UnaryOp op, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::kNeg:
        return -v;
      case UnaryOp::kAbs:
        return m_fabs(v);
      case UnaryOp::kSign:
        return static_cast<T>((v > 0) - (v < 0));
      case UnaryOp::kSquare:
        return v * v;
      case UnaryOp::kSqrt:
        return m_sqrt(v);
      case UnaryOp::kRsqrt:
        return T(1) / m_sqrt(v);
      case UnaryOp::kReciprocal:
        return T(1) / v;
      case UnaryOp::kExp:
        return m_exp(v);
      case UnaryOp::kExpm1:
        return m_expm1(v);
      case UnaryOp::kLog:
        return m_log(v);
      case UnaryOp::kLog1p:
        return m_log1p(v);
      case UnaryOp::kSin:
        return m_sin(v);
      case UnaryOp::kCos:
        return m_cos(v);
      case UnaryOp::kTan:
        return m_tan(v);
      case UnaryOp::kErf:
        return m_erf(v);
      case UnaryOp::kFloor:
        return m_floor(v);
      case UnaryOp::kCeil:
        return m_ceil(v);
      case UnaryOp::kRound:
        return m_nearbyint(v);  // half to even in the default mode
      default:
        return v;
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else {
    switch (op) {
      case UnaryOp::kNeg:
        return static_cast<T>(-v);
      case UnaryOp::kAbs:
        if constexpr (std::is_signed_v<T>) return static_cast<T>(v < 0 ? -v : v);
        return v;
      case UnaryOp::kSign:
        if constexpr (std::is_unsigned_v<T>) {
          return static_cast<T>(v > 0);
        } else {
          return static_cast<T>((v > 0) - (v < 0));
        }
      case UnaryOp::kSquare:
        return static_cast<T>(v * v);
      default:
        return v;
    }
  }
}

template <typename T>
CADRE_HOST_DEVICE inline bool unary_predicate(UnaryOp op, T v) {
  switch (op) {
    case UnaryOp::kIsNan:
      return is_nan(v);
    case UnaryOp::kIsInf:
      return is_inf(v);
    case UnaryOp::kIsFinite:
      return !is_nan(v) && !is_inf(v);
    case UnaryOp::kLogicalNot:
      return !v;
    default:
      return false;
  }
}

// --- binary ops ---
CADRE_HOST_DEVICE constexpr bool binary_is_comparison(BinaryOp op) {
  return op == BinaryOp::kEqual || op == BinaryOp::kNotEqual || op == BinaryOp::kLess ||
         op == BinaryOp::kLessEqual || op == BinaryOp::kGreater || op == BinaryOp::kGreaterEqual;
}
CADRE_HOST_DEVICE constexpr bool binary_is_logical(BinaryOp op) {
  return op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr;
}
template <typename T>
constexpr bool binary_defined(BinaryOp op) {
  if (binary_is_comparison(op)) return true;
  return std::is_same_v<T, bool> == binary_is_logical(op);
}

template <typename T>
CADRE_HOST_DEVICE inline T floor_div_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return m_floor(a / b);
  } else {
    if (b == 0) return 0;
    T q = a / b;
    if constexpr (std::is_signed_v<T>) {
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    }
    return q;
  }
}

template <typename T>
CADRE_HOST_DEVICE inline T floor_mod_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = m_fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    if (b == 0) return 0;
    T r = a % b;
    if constexpr (std::is_signed_v<T>) {
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
    }
    return r;
  }
}

template <typename T>
CADRE_HOST_DEVICE inline bool compare_value(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::kEqual:
      return x == y;
    case BinaryOp::kNotEqual:
      return x != y;
    case BinaryOp::kLess:
      return x < y;
    case BinaryOp::kLessEqual:
      return x <= y;
    case BinaryOp::kGreater:
      return x > y;
    case BinaryOp::kGreaterEqual:
      return x >= y;
    case BinaryOp::kLogicalAnd:
      return x && y;
    case BinaryOp::kLogicalOr:
      return x || y;
    default:
      return false;
  }
}

// Arithmetic ops (not comparisons or logical ops) on numeric T.
template <typename T>
CADRE_HOST_DEVICE inline T binary_value(BinaryOp op, T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    return x;
  } else {
    switch (op) {
      case BinaryOp::kAdd:
        return T(x + y);
      case BinaryOp::kSub:
        return T(x - y);
      case BinaryOp::kMul:
        return T(x * y);
      case BinaryOp::kDiv:
        if constexpr (std::is_integral_v<T>) {
          return y == 0 ? T(0) : T(x / y);
        } else {
          return x / y;
        }
      case BinaryOp::kPow:
        return static_cast<T>(::pow(static_cast<double>(x), static_cast<double>(y)));
      case BinaryOp::kMaximum:
        if constexpr (std::is_floating_point_v<T>) {
          if (is_nan(x) || is_nan(y)) return quiet_nan<T>();
        }
        return x > y ? x : y;
      case BinaryOp::kMinimum:
        if constexpr (std::is_floating_point_v<T>) {
          if (is_nan(x) || is_nan(y)) return quiet_nan<T>();
        }
        return x < y ? x : y;
      case BinaryOp::kSquaredDifference:
        return T((x - y) * (x - y));
      case BinaryOp::kFloorDiv:
        return floor_div_value(x, y);
      case BinaryOp::kMod:
        return floor_mod_value(x, y);
      default:
        return x;
    }
  }
}

// --- activations (the CPU's forward() and derivative()) ---
template <typename T>
CADRE_HOST_DEVICE inline T activation_value(Activation act, T alpha, T x) {
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kSigmoid:
      return T(1) / (T(1) + m_exp(-x));
    case Activation::kTanh:
      return m_tanh(x);
    case Activation::kGelu:  // erfc, as TensorFlow: 1 + erf(x) cancels for negative x
      return T(0.5) * x * m_erfc(x * T(-0.70710678118654752440));
    case Activation::kElu:
      return x > T(0) ? x : alpha * m_expm1(x);
    case Activation::kLeakyRelu:
      return x > T(0) ? x : alpha * x;
    case Activation::kSoftplus:
      return m_log1p(m_exp(-m_fabs(x))) + (x > T(0) ? x : T(0));
  }
  return x;
}

// d act / d input from the saved value s (y or x as kernels::activation_uses_output says).
template <typename T>
CADRE_HOST_DEVICE inline T activation_derivative(Activation act, T alpha, T s) {
  switch (act) {
    case Activation::kNone:
      return T(1);
    case Activation::kRelu:
      return s > T(0) ? T(1) : T(0);
    case Activation::kSigmoid:
      return s * (T(1) - s);
    case Activation::kTanh:
      return T(1) - s * s;
    case Activation::kElu:
      return s > T(0) ? T(1) : s + alpha;
    case Activation::kGelu: {
      T cdf = T(0.5) * m_erfc(s * T(-0.70710678118654752440));
      // 1/sqrt(2 pi), as the CPU's 0.5 * inv_sqrtpi * sqrt2
      T pdf = m_exp(T(-0.5) * s * s) * T(0.5 * 0.56418958354775628695 * 1.41421356237309504880);
      return cdf + s * pdf;
    }
    case Activation::kLeakyRelu:
      return s > T(0) ? T(1) : alpha;
    case Activation::kSoftplus:
      return T(1) / (T(1) + m_exp(-s));
  }
  return T(1);
}

// dx = dy * act'(saved), with the CPU's shortcuts for ReLU and none (which also keep a NaN
// in dy from leaking through a zero derivative the same way).
template <typename T>
CADRE_HOST_DEVICE inline T activation_grad_value(Activation act, T alpha, T saved, T dy) {
  if (act == Activation::kRelu) return saved > T(0) ? dy : T(0);
  if (act == Activation::kNone) return dy;
  return dy * activation_derivative(act, alpha, saved);
}

// clamp(v, lo, hi) as the CPU's clip.
template <typename T>
CADRE_HOST_DEVICE inline T clip_value(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

}  // namespace cadre::backend::portable
