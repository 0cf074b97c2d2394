// CPU elementwise kernels: fill, copy, cast, unary and binary math, where, clip.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/portable/op_math.h"
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
    case DType::kBFloat16:
      fn.template operator()<BFloat16>();
      return;
    case DType::kFloat16:
      fn.template operator()<Float16>();
      return;
    default:
      visit_dtype(dtype, "cast", fn);
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
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return portable::float_to_integer<To>(value);
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
      parallel_for(0, n, kElementwiseGrain,
                   [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
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
  visit_storage_word(src.dtype(),
                     [&]<typename W>() { map1<W, W>(src, dst, [](W v) { return v; }); });
}

void cast(const Tensor& src, Tensor& dst) {
  visit_storage_dtype(src.dtype(), [&]<typename From>() {
    visit_storage_dtype(dst.dtype(), [&]<typename To>() {
      map1<From, To>(src, dst, [](From v) { return convert<To>(v); });
    });
  });
}

// Calls fn.template operator()<kOp>() with `op` as a compile-time constant, so that the
// portable definitions' switch over the op folds away inside the loops.
template <typename Fn>
void with_unary_op(UnaryOp op, Fn&& fn) {
  switch (op) {
#define CADRE_UNARY(name) \
  case UnaryOp::name:     \
    return fn.template operator()<UnaryOp::name>();
    // clang-format off
    CADRE_UNARY(kNeg) CADRE_UNARY(kAbs) CADRE_UNARY(kSign) CADRE_UNARY(kSquare)
    CADRE_UNARY(kSqrt) CADRE_UNARY(kRsqrt) CADRE_UNARY(kReciprocal) CADRE_UNARY(kExp)
    CADRE_UNARY(kExpm1) CADRE_UNARY(kLog) CADRE_UNARY(kLog1p) CADRE_UNARY(kSin)
    CADRE_UNARY(kCos) CADRE_UNARY(kTan) CADRE_UNARY(kErf) CADRE_UNARY(kFloor)
    CADRE_UNARY(kCeil) CADRE_UNARY(kRound) CADRE_UNARY(kLogicalNot) CADRE_UNARY(kIsNan)
    CADRE_UNARY(kIsInf) CADRE_UNARY(kIsFinite)
    // clang-format on
#undef CADRE_UNARY
  }
}

template <typename Fn>
void with_binary_op(BinaryOp op, Fn&& fn) {
  switch (op) {
#define CADRE_BINARY(name) \
  case BinaryOp::name:     \
    return fn.template operator()<BinaryOp::name>();
    // clang-format off
    CADRE_BINARY(kAdd) CADRE_BINARY(kSub) CADRE_BINARY(kMul) CADRE_BINARY(kDiv)
    CADRE_BINARY(kPow) CADRE_BINARY(kMaximum) CADRE_BINARY(kMinimum)
    CADRE_BINARY(kSquaredDifference) CADRE_BINARY(kFloorDiv) CADRE_BINARY(kMod)
    CADRE_BINARY(kEqual) CADRE_BINARY(kNotEqual) CADRE_BINARY(kLess) CADRE_BINARY(kLessEqual)
    CADRE_BINARY(kGreater) CADRE_BINARY(kGreaterEqual) CADRE_BINARY(kLogicalAnd)
    CADRE_BINARY(kLogicalOr)
    // clang-format on
#undef CADRE_BINARY
  }
}

void unary(UnaryOp op, const Tensor& x, Tensor& out) {
  visit_dtype(x.dtype(), "unary op", [&]<typename T>() {
    with_unary_op(op, [&]<UnaryOp kOp>() {
      if constexpr (!portable::unary_defined<T>(kOp)) {
        throw_unsupported_dtype("unary op", x.dtype(), "a dtype the op is defined for");
      } else if constexpr (portable::unary_is_predicate(kOp)) {
        map1<T, bool>(x, out, [](T v) { return portable::unary_predicate(kOp, v); });
      } else {
        map1<T, T>(x, out, [](T v) { return portable::unary_value(kOp, v); });
      }
    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  visit_dtype(a.dtype(), "binary op", [&]<typename T>() {
    with_binary_op(op, [&]<BinaryOp kOp>() {
      if constexpr (!portable::binary_defined<T>(kOp)) {
        throw_unsupported_dtype("binary op", a.dtype(), "a dtype the op is defined for");
      } else if constexpr (portable::binary_is_comparison(kOp) ||
                           portable::binary_is_logical(kOp)) {
        map2<T, bool>(a, b, out, [](T x, T y) { return portable::compare_value(kOp, x, y); });
      } else {
        map2<T, T>(a, b, out, [](T x, T y) { return portable::binary_value(kOp, x, y); });
      }
    });
  });
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
      map1<T, T>(x, out, [=](T v) { return portable::clip_value(v, l, h); });
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
