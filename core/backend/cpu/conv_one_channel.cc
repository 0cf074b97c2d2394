#include "core/backend/cpu/conv_one_channel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "cadre/runtime/threading.h"
#include "core/backend/cpu/conv_one_channel_lanes.h"
#include "core/backend/cpu/conv_output_grad.h"
#include "core/backend/cpu/lanes.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/vec8.h"
#include "core/backend/portable/op_math.h"

// The loop templates below take and return 16-lane values; they are always inlined into
// the functions compiled for AVX-512, so the calling convention GCC warns about never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cadre::backend::cpu::conv_one_channel {
namespace {

using portable::ConvGeometry;

// The largest pooling window computed with the convolution, in taps.
constexpr int64_t kMaxWindowTaps = 16;
std::atomic<bool> wide_enabled{true};

bool cpu_has_wide_lanes() {
#if CADRE_WIDE_LANES
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return has;
#else
  return false;
#endif
}

// Output channels [c0, c0 + L::kLanes) of output pixel (oy, ox) of `image`: a sum of
// broadcast input values times the filter vectors, from `start` (the bias), then the ReLU.
template <int KH, int KW, typename L>
[[gnu::always_inline]] inline typename L::Float output_at(const float* image,
                                                          const typename L::Float* filter,
                                                          typename L::Float start, bool relu,
                                                          const ConvGeometry& g, int64_t oy,
                                                          int64_t ox) {
  using Vec = typename L::Float;
  const int64_t top = oy - g.ph, left = ox - g.pw;
  Vec sum = start;
  if (top >= 0 && top + KH <= g.h && left >= 0 && left + KW <= g.w) {
    const float* in = image + top * g.w + left;
#pragma GCC unroll 16
    for (int ky = 0; ky < KH; ++ky) {
#pragma GCC unroll 16
      for (int kx = 0; kx < KW; ++kx) sum += in[ky * g.w + kx] * filter[ky * KW + kx];
    }
  } else {
    for (int ky = 0; ky < KH; ++ky) {
      if (top + ky < 0 || top + ky >= g.h) continue;
      for (int kx = 0; kx < KW; ++kx) {
        if (left + kx < 0 || left + kx >= g.w) continue;
        sum += image[(top + ky) * g.w + left + kx] * filter[ky * KW + kx];
      }
    }
  }
  return relu ? lanes::select(sum > 0.f, sum, Vec{}) : sum;
}

// The same for P output pixels at once, whose sums are independent: one pixel's sum is a
// chain of dependent multiply-adds, so P of them interleaved keep the arithmetic units
// busy. Each sum is added in the same order as output_at's, so the bits are the same. The
// filter vectors are read from `taps` (the filter at channel c0) tap by tap rather than
// held, so that the P sums have the registers.
template <int KH, int KW, int P, typename L>
[[gnu::always_inline]] inline void outputs_at(const float* image, const typename L::Float* filter,
                                              const float* taps, typename L::Float start, bool relu,
                                              const ConvGeometry& g, const int64_t (&oy)[P],
                                              const int64_t (&ox)[P], typename L::Float (&out)[P]) {
  using Vec = typename L::Float;
  const float* in[P];
  for (int p = 0; p < P; ++p) {
    const int64_t top = oy[p] - g.ph, left = ox[p] - g.pw;
    if (top < 0 || top + KH > g.h || left < 0 || left + KW > g.w) {
      for (int q = 0; q < P; ++q) {
        out[q] = output_at<KH, KW, L>(image, filter, start, relu, g, oy[q], ox[q]);
      }
      return;
    }
    in[p] = image + top * g.w + left;
  }
  Vec sum[P];
  for (int p = 0; p < P; ++p) sum[p] = start;
#pragma GCC unroll 16
  for (int ky = 0; ky < KH; ++ky) {
#pragma GCC unroll 16
    for (int kx = 0; kx < KW; ++kx) {
      const Vec f = lanes::load<Vec>(taps + (ky * KW + kx) * g.o);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) sum[p] += in[p][ky * g.w + kx] * f;
    }
  }
  for (int p = 0; p < P; ++p) out[p] = relu ? lanes::select(sum[p] > 0.f, sum[p], Vec{}) : sum[p];
}

// A window's outputs `v` in tap order: its maximum (the first tap, then a strictly greater
// value, as max pooling finds it) and that tap, stored at `at`.
template <typename L>
[[gnu::always_inline]] inline void store_max(const typename L::Float* v, int64_t taps, float* y,
                                             int32_t* argmax, int64_t at) {
  using Int = typename L::Int;
  typename L::Float best = v[0];
  Int where{};
  for (int64_t t = 1; t < taps; ++t) {
    const Int greater = v[t] > best;
    best = lanes::select(greater, v[t], best);
    where = lanes::select(greater, Int{} + static_cast<int32_t>(t), where);
  }
  lanes::store(y + at, best);
  lanes::store(argmax + at, where);
}

// The forward pass's arguments; `pool` null when the output is stored, else the pooling
// (windows that tile the output, no padding) whose maxima go to y [N, ph, pw, O] and taps
// to argmax.
struct Forward {
  const float* x;
  const float* w;
  const float* bias;
  bool relu;
  ConvGeometry g;
  const kernels::Pool2DParams* pool;
  float* y;
  int32_t* argmax;
  int64_t ph, pw;
};

// Image n's output channels [c0, c0 + L::kLanes), with the KH * KW filter vectors in
// registers.
template <int KH, int KW, typename L>
[[gnu::always_inline]] inline void forward_chunk(const Forward& f, int64_t n, int64_t c0) {
  using Vec = typename L::Float;
  const ConvGeometry& g = f.g;
  Vec filter[KH * KW];
  for (int t = 0; t < KH * KW; ++t) filter[t] = lanes::load<Vec>(f.w + t * g.o + c0);
  const Vec start = f.bias != nullptr ? lanes::load<Vec>(f.bias + c0) : Vec{};
  const float* image = f.x + n * g.h * g.w;
  const float* taps = f.w + c0;
  if (f.pool == nullptr) {
    float* out = f.y + n * g.oh * g.ow * g.o + c0;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      int64_t ox = 0;
      for (; ox + 8 <= g.ow; ox += 8, out += 8 * g.o) {
        Vec sums[8];
        outputs_at<KH, KW, 8, L>(
            image, filter, taps, start, f.relu, g, {oy, oy, oy, oy, oy, oy, oy, oy},
            {ox, ox + 1, ox + 2, ox + 3, ox + 4, ox + 5, ox + 6, ox + 7}, sums);
        for (int p = 0; p < 8; ++p) lanes::store(out + p * g.o, sums[p]);
      }
      for (; ox < g.ow; ++ox, out += g.o) {
        lanes::store(out, output_at<KH, KW, L>(image, filter, start, f.relu, g, oy, ox));
      }
    }
    return;
  }
  const int64_t wh = f.pool->window[0], ww = f.pool->window[1];
  const int64_t offset = n * f.ph * f.pw * g.o + c0;
  for (int64_t py = 0; py < f.ph; ++py) {
    const int64_t top = py * wh;
    int64_t px = 0;
    if (wh == 2 && ww == 2) {
      // Two windows at once.
      for (; px + 2 <= f.pw; px += 2) {
        const int64_t left = px * 2;
        Vec v[8];
        outputs_at<KH, KW, 8, L>(
            image, filter, taps, start, f.relu, g,
            {top, top, top + 1, top + 1, top, top, top + 1, top + 1},
            {left, left + 1, left, left + 1, left + 2, left + 3, left + 2, left + 3}, v);
        store_max<L>(v, 4, f.y, f.argmax, offset + (py * f.pw + px) * g.o);
        store_max<L>(v + 4, 4, f.y, f.argmax, offset + (py * f.pw + px + 1) * g.o);
      }
    }
    for (; px < f.pw; ++px) {
      const int64_t left = px * ww;
      Vec v[kMaxWindowTaps];
      for (int64_t wy = 0; wy < wh; ++wy) {
        for (int64_t wx = 0; wx < ww; ++wx) {
          v[wy * ww + wx] =
              output_at<KH, KW, L>(image, filter, start, f.relu, g, top + wy, left + wx);
        }
      }
      store_max<L>(v, wh * ww, f.y, f.argmax, offset + (py * f.pw + px) * g.o);
    }
  }
}

template <typename L>
[[gnu::always_inline]] inline void forward_image(const Forward& f, int64_t n) {
  for (int64_t c0 = 0; c0 < f.g.o; c0 += L::kLanes) {
    if (f.g.kh == 3) {
      forward_chunk<3, 3, L>(f, n, c0);
    } else {
      forward_chunk<2, 2, L>(f, n, c0);
    }
  }
}

void forward_image_narrow(const Forward& f, int64_t n) { forward_image<Narrow>(f, n); }
#if CADRE_WIDE_LANES
CADRE_WIDE_TARGET void forward_image_wide(const Forward& f, int64_t n) {
  forward_image<Wide>(f, n);
}
#endif

void forward_any(const Tensor& x, const Tensor& w, const Tensor& bias,
                 kernels::Activation activation, const ConvGeometry& g,
                 const kernels::Pool2DParams* pool, Tensor& y, int32_t* argmax) {
  const Forward f{typed<float>(x),
                  typed<float>(w),
                  bias.defined() ? typed<float>(bias) : nullptr,
                  activation == kernels::Activation::kRelu,
                  g,
                  pool,
                  typed_mut<float>(y),
                  argmax,
                  y.shape()[1],
                  y.shape()[2]};
  void (*image)(const Forward&, int64_t) = &forward_image_narrow;
#if CADRE_WIDE_LANES
  if (use_wide(g)) image = &forward_image_wide;
#endif
  parallel_for(0, g.n, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) image(f, n);
  });
}

}  // namespace

bool use_wide(const ConvGeometry& g) {
  return g.o % Wide::kLanes == 0 && wide_enabled.load(std::memory_order_relaxed) &&
         cpu_has_wide_lanes();
}

bool in_registers_suits(const ConvGeometry& g) { return suits(g) && in_registers(g); }

void forward(const Tensor& x, const Tensor& w, const Tensor& bias, kernels::Activation activation,
             Tensor& y, const ConvGeometry& g) {
  forward_any(x, w, bias, activation, g, nullptr, y, nullptr);
}

bool forward_max_pool_suits(const ConvGeometry& g, const kernels::Pool2DParams& pool) {
  const bool no_padding = pool.pad_begin == std::array<int64_t, 2>{0, 0} &&
                          pool.pad_end == std::array<int64_t, 2>{0, 0};
  return in_registers_suits(g) && pool.kind == kernels::PoolKind::kMax &&
         pool.strides == pool.window && no_padding && pool.window[0] <= g.oh &&
         pool.window[1] <= g.ow && pool.window[0] * pool.window[1] <= kMaxWindowTaps;
}

void forward_max_pool(const Tensor& x, const Tensor& w, const Tensor& bias,
                      kernels::Activation activation, const kernels::Pool2DParams& pool, Tensor& y,
                      Tensor& argmax, const ConvGeometry& g) {
  forward_any(x, w, bias, activation, g, &pool, y, typed_mut<int32_t>(argmax));
}

bool suits(const ConvGeometry& g) {
  return g.c == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}

void set_wide_lanes(bool on) { wide_enabled.store(on, std::memory_order_relaxed); }

}  // namespace cadre::backend::cpu::conv_one_channel
