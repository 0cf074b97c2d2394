#include "core/backend/cpu/conv_one_channel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "cadre/runtime/threading.h"
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

constexpr int64_t kImagesPerBlock = 8;
// The largest pooling window computed with the convolution, in taps.
constexpr int64_t kMaxWindowTaps = 16;
using Narrow = Lanes<8>;
using Wide = Lanes<16>;

// The wide loops are compiled for AVX-512 inside functions with this target and run where
// the CPU has it: 16 output channels per vector instead of 8. Each lane is one channel
// with the same arithmetic in the same order, so both widths give the same bits.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CADRE_WIDE_LANES 1
#define CADRE_WIDE_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))
#else
#define CADRE_WIDE_LANES 0
#define CADRE_WIDE_TARGET
#endif

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

bool use_wide(const ConvGeometry& g) {
  return g.o % Wide::kLanes == 0 && wide_enabled.load(std::memory_order_relaxed) &&
         cpu_has_wide_lanes();
}

// Adds image n's filter gradient of channels [c0, c0 + L::kLanes) to acc ([KH * KW, o]) and
// its bias gradient to bias_acc. The KH * KW sums stay in registers over the pixels whose
// taps are all inside the image; the others (at padded borders) add to `border`, which is
// indexed at run time and so lives in memory.
template <int KH, int KW, typename L, typename Source>
[[gnu::always_inline]] inline void channel_chunk(const float* x, const Source& source,
                                                 const ConvGeometry& g, int64_t n, int64_t c0,
                                                 float* acc, float* bias_acc) {
  using Vec = typename L::Float;
  Vec sums[KH * KW] = {};
  Vec border[KH * KW] = {};
  Vec bias{};
  const float* image = x + n * g.h * g.w;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t top = oy - g.ph;
    const bool rows_inside = top >= 0 && top + KH <= g.h;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t left = ox - g.pw;
      const Vec grad = source.template at<L>(n, oy, ox, c0);
      bias += grad;
      if (rows_inside && left >= 0 && left + KW <= g.w) {
        const float* in = image + top * g.w + left;
#pragma GCC unroll 16
        for (int ky = 0; ky < KH; ++ky) {
#pragma GCC unroll 16
          for (int kx = 0; kx < KW; ++kx) sums[ky * KW + kx] += in[ky * g.w + kx] * grad;
        }
        continue;
      }
      for (int ky = 0; ky < KH; ++ky) {
        if (top + ky < 0 || top + ky >= g.h) continue;
        for (int kx = 0; kx < KW; ++kx) {
          if (left + kx < 0 || left + kx >= g.w) continue;
          border[ky * KW + kx] += image[(top + ky) * g.w + left + kx] * grad;
        }
      }
    }
  }
  for (int t = 0; t < KH * KW; ++t) {
    const Vec total = sums[t] + border[t];
    for (int64_t k = 0; k < L::kLanes; ++k) acc[t * g.o + c0 + k] += total[k];
  }
  for (int64_t k = 0; k < L::kLanes; ++k) bias_acc[c0 + k] += bias[k];
}

// Any filter size and channel count: per pixel and tap, a vector of channels.
void any_shape(const float* x, const float* dy, const float* y, const ConvGeometry& g,
               int64_t first, int64_t last, float* acc, float* bias_acc) {
  const int64_t o = g.o;
  std::vector<float> kept(static_cast<size_t>(o));
  for (int64_t n = first; n < last; ++n) {
    const float* image = x + n * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const int64_t top = oy - g.ph;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t left = ox - g.pw;
        const int64_t offset = ((n * g.oh + oy) * g.ow + ox) * o;
        for (int64_t c = 0; c < o; ++c) {
          kept[c] = y == nullptr ? dy[offset + c]
                                 : portable::activation_grad_value(kernels::Activation::kRelu, 0.f,
                                                                   y[offset + c], dy[offset + c]);
        }
        const float* grad = kept.data();
        vec8::add_into(bias_acc, grad, o);
        for (int64_t ky = std::max<int64_t>(0, -top); ky < std::min<int64_t>(g.kh, g.h - top);
             ++ky) {
          for (int64_t kx = std::max<int64_t>(0, -left); kx < std::min<int64_t>(g.kw, g.w - left);
               ++kx) {
            const float v = image[(top + ky) * g.w + left + kx];
            float* tap = acc + (ky * g.kw + kx) * o;
            for (int64_t c = 0; c < o; ++c) tap[c] += v * grad[c];
          }
        }
      }
    }
  }
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

// Images [first, last) of a block, image by image, so that the image's gradient is still in
// cache for its later chunks.
template <typename L, typename Source>
[[gnu::always_inline]] inline void block(const float* x, const Source& source,
                                         const ConvGeometry& g, int64_t first, int64_t last,
                                         float* acc, float* bias_acc) {
  for (int64_t n = first; n < last; ++n) {
    for (int64_t c0 = 0; c0 < g.o; c0 += L::kLanes) {
      if (g.kh == 3) {
        channel_chunk<3, 3, L>(x, source, g, n, c0, acc, bias_acc);
      } else {
        channel_chunk<2, 2, L>(x, source, g, n, c0, acc, bias_acc);
      }
    }
  }
}

template <typename Source>
void block_narrow(const float* x, const Source& source, const ConvGeometry& g, int64_t first,
                  int64_t last, float* acc, float* bias_acc) {
  block<Narrow>(x, source, g, first, last, acc, bias_acc);
}
#if CADRE_WIDE_LANES
template <typename Source>
CADRE_WIDE_TARGET void block_wide(const float* x, const Source& source, const ConvGeometry& g,
                                  int64_t first, int64_t last, float* acc, float* bias_acc) {
  block<Wide>(x, source, g, first, last, acc, bias_acc);
}
#endif

// The filter sizes and channel counts whose sums stay in registers.
bool in_registers(const ConvGeometry& g) {
  return g.o % Narrow::kLanes == 0 && ((g.kh == 3 && g.kw == 3) || (g.kh == 2 && g.kw == 2));
}

// Sums per block of images, then the blocks in order; `block_fn(first, last, acc, bias_acc)`
// adds images [first, last).
template <typename BlockFn>
void sum_blocks(const ConvGeometry& g, Tensor& dw, Tensor& db, BlockFn&& block_fn) {
  const int64_t taps = g.kh * g.kw, stride = (taps + 1) * g.o;
  const int64_t blocks = (g.n + kImagesPerBlock - 1) / kImagesPerBlock;
  // Per block: taps rows of filter gradient, then one of bias gradient.
  std::vector<float> partial(static_cast<size_t>(blocks * stride), 0.f);
  parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* acc = partial.data() + i * stride;
      block_fn(i * kImagesPerBlock, std::min(g.n, (i + 1) * kImagesPerBlock), acc,
               acc + taps * g.o);
    }
  });
  for (int64_t i = 1; i < blocks; ++i) {
    vec8::add_into(partial.data(), partial.data() + i * stride, stride);
  }
  if (dw.defined()) std::memcpy(typed_mut<float>(dw), partial.data(), taps * g.o * sizeof(float));
  if (db.defined())
    std::memcpy(typed_mut<float>(db), partial.data() + taps * g.o, g.o * sizeof(float));
}

// The filter gradient from `source` with the sums in registers (in_registers(g)).
template <typename Source>
void sum_blocks_in_registers(const float* x, const Source& source, const ConvGeometry& g,
                             Tensor& dw, Tensor& db) {
  auto block_fn = &block_narrow<Source>;
#if CADRE_WIDE_LANES
  if (use_wide(g)) block_fn = &block_wide<Source>;
#endif
  sum_blocks(g, dw, db, [&](int64_t first, int64_t last, float* acc, float* bias_acc) {
    block_fn(x, source, g, first, last, acc, bias_acc);
  });
}

}  // namespace

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

void filter_grad(const Tensor& x, const Tensor& dy, const Tensor& y, kernels::Activation activation,
                 Tensor& dw, Tensor& db, const ConvGeometry& g) {
  const float* px = typed<float>(x);
  const float* pg = typed<float>(dy);
  const float* py = activation == kernels::Activation::kRelu ? typed<float>(y) : nullptr;
  if (in_registers(g)) return sum_blocks_in_registers(px, DenseOutputGrad(pg, py, g), g, dw, db);
  sum_blocks(g, dw, db, [&](int64_t first, int64_t last, float* acc, float* bias_acc) {
    any_shape(px, pg, py, g, first, last, acc, bias_acc);
  });
}

void filter_grad(const Tensor& x, const kernels::MaxPoolInputGrad& grad,
                 kernels::Activation activation, Tensor& dw, Tensor& db, const ConvGeometry& g) {
  sum_blocks_in_registers(typed<float>(x),
                          MaxPoolOutputGrad(grad, activation == kernels::Activation::kRelu, g), g,
                          dw, db);
}

void set_wide_lanes(bool on) { wide_enabled.store(on, std::memory_order_relaxed); }

}  // namespace cadre::backend::cpu::conv_one_channel
