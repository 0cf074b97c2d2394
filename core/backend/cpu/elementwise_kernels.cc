// CPU elementwise kernels: fill, copy, cast, unary and binary math, where, clip.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/elementwise.h"

namespace cadre::backend::cpu {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

bool all_zero_strides(const Tensor& t) {
  for (int d = 0; d < t.rank(); ++d) {
    if (t.shape()[d] != 1 && t.strides()[d] != 0) return false;
  }
  return true;
}

// out[i] = f(x[i]) for any strides of x and out.
template <typename T, typename R, typename F>
void map1(const Tensor& x, const Tensor& out, F f) {
  const T* px = typed<T>(x);
  R* po = typed_mut<R>(out);
  int64_t n = out.numel();
  if (x.is_contiguous() && out.is_contiguous()) {
    parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) po[i] = f(px[i]);
    });
    return;
  }
  StridedLoop<2> loop({&out, &x});
  int64_t so = loop.inner_stride(0), sx = loop.inner_stride(1);
  parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    loop.for_each_row(b, e, [&](const std::array<int64_t, 2>& off, int64_t count) {
      R* o = po + off[0];
      const T* a = px + off[1];
      for (int64_t i = 0; i < count; ++i) o[i * so] = f(a[i * sx]);
    });
  });
}

// out[i] = f(a[i], b[i]); out contiguous; a and b any strides (broadcast views).
template <typename T, typename R, typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* pa = typed<T>(a);
  const T* pb = typed<T>(b);
  R* po = typed_mut<R>(out);
  int64_t n = out.numel();
  if (a.is_contiguous() && b.is_contiguous()) {
    parallel_for(0, n, kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], pb[i]);
    });
    return;
  }
  if (a.is_contiguous() && all_zero_strides(b)) {
    const T vb = pb[0];
    parallel_for(0, n, kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], vb);
    });
    return;
  }
  if (all_zero_strides(a) && b.is_contiguous()) {
    const T va = pa[0];
    parallel_for(0, n, kElementwiseGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(va, pb[i]);
    });
    return;
  }
  StridedLoop<3> loop({&out, &a, &b});
  int64_t sa = loop.inner_stride(1), sb = loop.inner_stride(2);
  parallel_for(0, n, kElementwiseGrain, [&](int64_t s, int64_t e) {
    loop.for_each_row(s, e, [&](const std::array<int64_t, 3>& off, int64_t count) {
      R* o = po + off[0];
      const T* x = pa + off[1];
      const T* y = pb + off[2];
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < count; ++i) o[i] = f(x[i], y[i]);
      } else if (sa == 1 && sb == 0) {
        const T v = y[0];
        for (int64_t i = 0; i < count; ++i) o[i] = f(x[i], v);
      } else if (sa == 0 && sb == 1) {
        const T v = x[0];
        for (int64_t i = 0; i < count; ++i) o[i] = f(v, y[i]);
      } else {
        for (int64_t i = 0; i < count; ++i) o[i] = f(x[i * sa], y[i * sb]);
      }
    });
  });
}

// Calls fn.template operator()<T>() for every dtype, the 16-bit float types included.
template <typename Fn>
void visit_storage_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBFloat16: fn.template operator()<BFloat16>(); return;
    case DType::kFloat16: fn.template operator()<Float16>(); return;
    default: visit_dtype(dtype, "cast", fn);
  }
}

template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<From, BFloat16> || std::is_same_v<From, Float16>) {
    return convert<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, BFloat16> || std::is_same_v<To, Float16>) {
    return To(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else {
    return static_cast<To>(value);
  }
}

void fill(Tensor& out, double value) {
  visit_storage_dtype(out.dtype(), [&]<typename T>() {
    T v = convert<T>(value);
    T* p = typed_mut<T>(out);
    int64_t n = out.numel();
    if (out.is_contiguous()) {
      parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        std::fill(p + b, p + e, v);
      });
      return;
    }
    StridedLoop<1> loop({&out});
    int64_t s = loop.inner_stride(0);
    parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      loop.for_each_row(b, e, [&](const std::array<int64_t, 1>& off, int64_t count) {
        for (int64_t i = 0; i < count; ++i) p[off[0] + i * s] = v;
      });
    });
  });
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.nbytes() > 0 && src.raw_data() != dst.raw_data()) {
      std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    }
    return;
  }
  visit_storage_word(src.dtype(), [&]<typename W>() { map1<W, W>(src, dst, [](W v) { return v; }); });
}

void cast(const Tensor& src, Tensor& dst) {
  visit_storage_dtype(src.dtype(), [&]<typename From>() {
    visit_storage_dtype(dst.dtype(), [&]<typename To>() {
      map1<From, To>(src, dst, [](From v) { return convert<To>(v); });
    });
  });
}

template <typename T>
T round_half_even(T v) {
  return std::nearbyint(v);  // the default rounding mode rounds half to even
}

template <typename T>
void unary_typed(UnaryOp op, const Tensor& x, const Tensor& out) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::kNeg: return map1<T, T>(x, out, [](T v) { return -v; });
      case UnaryOp::kAbs: return map1<T, T>(x, out, [](T v) { return std::abs(v); });
      case UnaryOp::kSign:
        return map1<T, T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
      case UnaryOp::kSquare: return map1<T, T>(x, out, [](T v) { return v * v; });
      case UnaryOp::kSqrt: return map1<T, T>(x, out, [](T v) { return std::sqrt(v); });
      case UnaryOp::kRsqrt: return map1<T, T>(x, out, [](T v) { return T(1) / std::sqrt(v); });
      case UnaryOp::kReciprocal: return map1<T, T>(x, out, [](T v) { return T(1) / v; });
      case UnaryOp::kExp: return map1<T, T>(x, out, [](T v) { return std::exp(v); });
      case UnaryOp::kExpm1: return map1<T, T>(x, out, [](T v) { return std::expm1(v); });
      case UnaryOp::kLog: return map1<T, T>(x, out, [](T v) { return std::log(v); });
      case UnaryOp::kLog1p: return map1<T, T>(x, out, [](T v) { return std::log1p(v); });
      case UnaryOp::kSin: return map1<T, T>(x, out, [](T v) { return std::sin(v); });
      case UnaryOp::kCos: return map1<T, T>(x, out, [](T v) { return std::cos(v); });
      case UnaryOp::kTan: return map1<T, T>(x, out, [](T v) { return std::tan(v); });
      case UnaryOp::kErf: return map1<T, T>(x, out, [](T v) { return std::erf(v); });
      case UnaryOp::kFloor: return map1<T, T>(x, out, [](T v) { return std::floor(v); });
      case UnaryOp::kCeil: return map1<T, T>(x, out, [](T v) { return std::ceil(v); });
      case UnaryOp::kRound: return map1<T, T>(x, out, [](T v) { return round_half_even(v); });
      case UnaryOp::kIsNan: return map1<T, bool>(x, out, [](T v) { return std::isnan(v); });
      case UnaryOp::kIsInf: return map1<T, bool>(x, out, [](T v) { return std::isinf(v); });
      case UnaryOp::kIsFinite: return map1<T, bool>(x, out, [](T v) { return std::isfinite(v); });
      case UnaryOp::kLogicalNot: break;
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if (op == UnaryOp::kLogicalNot) return map1<bool, bool>(x, out, [](bool v) { return !v; });
  } else {
    switch (op) {
      case UnaryOp::kNeg: return map1<T, T>(x, out, [](T v) { return static_cast<T>(-v); });
      case UnaryOp::kAbs:
        return map1<T, T>(x, out, [](T v) {
          if constexpr (std::is_signed_v<T>) return static_cast<T>(v < 0 ? -v : v);
          return v;
        });
      case UnaryOp::kSign:
        return map1<T, T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
      case UnaryOp::kSquare: return map1<T, T>(x, out, [](T v) { return static_cast<T>(v * v); });
      default: break;
    }
  }
  throw_unsupported_dtype("unary op", x.dtype(), "a dtype the op is defined for");
}

void unary(UnaryOp op, const Tensor& x, Tensor& out) {
  visit_dtype(x.dtype(), "unary op", [&]<typename T>() { unary_typed<T>(op, x, out); });
}

template <typename T>
T floor_div_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::floor(a / b);
  } else {
    if (b == 0) return 0;  // TensorFlow raises here; the op layer does not reach it for floats
    T q = a / b;
    if constexpr (std::is_signed_v<T>) {
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    }
    return q;
  }
}

template <typename T>
T floor_mod_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
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
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::kEqual: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::kNotEqual: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::kLess: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::kLessEqual: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::kGreater: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::kGreaterEqual:
      return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
    default: break;
  }
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::kLogicalAnd: return map2<T, bool>(a, b, out, [](T x, T y) { return x && y; });
      case BinaryOp::kLogicalOr: return map2<T, bool>(a, b, out, [](T x, T y) { return x || y; });
      default: break;
    }
  } else {
    switch (op) {
      case BinaryOp::kAdd: return map2<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
      case BinaryOp::kSub: return map2<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
      case BinaryOp::kMul: return map2<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
      case BinaryOp::kDiv:
        return map2<T, T>(a, b, out, [](T x, T y) {
          if constexpr (std::is_integral_v<T>) {
            return y == 0 ? T(0) : T(x / y);
          } else {
            return x / y;
          }
        });
      case BinaryOp::kPow:
        return map2<T, T>(a, b, out, [](T x, T y) {
          return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
        });
      case BinaryOp::kMaximum:
        return map2<T, T>(a, b, out, [](T x, T y) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
          }
          return x > y ? x : y;
        });
      case BinaryOp::kMinimum:
        return map2<T, T>(a, b, out, [](T x, T y) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
          }
          return x < y ? x : y;
        });
      case BinaryOp::kSquaredDifference:
        return map2<T, T>(a, b, out, [](T x, T y) { return T((x - y) * (x - y)); });
      case BinaryOp::kFloorDiv:
        return map2<T, T>(a, b, out, [](T x, T y) { return floor_div_value(x, y); });
      case BinaryOp::kMod:
        return map2<T, T>(a, b, out, [](T x, T y) { return floor_mod_value(x, y); });
      default: break;
    }
  }
  throw_unsupported_dtype("binary op", a.dtype(), "a dtype the op is defined for");
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  visit_dtype(a.dtype(), "binary op", [&]<typename T>() { binary_typed<T>(op, a, b, out); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  visit_dtype(a.dtype(), "where", [&]<typename T>() {
    const bool* pc = typed<bool>(cond);
    const T* pa = typed<T>(a);
    const T* pb = typed<T>(b);
    T* po = typed_mut<T>(out);
    StridedLoop<4> loop({&out, &cond, &a, &b});
    int64_t sc = loop.inner_stride(1), sa = loop.inner_stride(2), sb = loop.inner_stride(3);
    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t s, int64_t e) {
      loop.for_each_row(s, e, [&](const std::array<int64_t, 4>& off, int64_t count) {
        for (int64_t i = 0; i < count; ++i) {
          po[off[0] + i] = pc[off[1] + i * sc] ? pa[off[2] + i * sa] : pb[off[3] + i * sb];
        }
      });
    });
  });
}

void clip(const Tensor& x, double lo, double hi, Tensor& out) {
  visit_dtype(x.dtype(), "clip_by_value", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw_unsupported_dtype("clip_by_value", x.dtype(), "a numeric dtype");
    } else {
      T l = static_cast<T>(lo), h = static_cast<T>(hi);
      map1<T, T>(x, out, [=](T v) { return v < l ? l : (v > h ? h : v); });
    }
  });
}

}  // namespace

Tensor contiguous_raw(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy(t, out);
  return out;
}

void register_elementwise_kernels() {
  constexpr DeviceType kCpu = DeviceType::kCPU;
  kernels::fill.set(kCpu, &fill);
  kernels::copy.set(kCpu, &copy);
  kernels::cast.set(kCpu, &cast);
  kernels::unary.set(kCpu, &unary);
  kernels::binary.set(kCpu, &binary);
  kernels::where.set(kCpu, &where);
  kernels::clip.set(kCpu, &clip);
}

}  // namespace cadre::backend::cpu
