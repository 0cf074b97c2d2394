#include "core/backend/cpu/conv_one_channel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cadre/runtime/threading.h"
#include "core/backend/cpu/conv_output_grad.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/vec8.h"
#include "core/backend/portable/op_math.h"

namespace cadre::backend::cpu::conv_one_channel {
namespace {

using portable::ConvGeometry;

constexpr int64_t kImagesPerBlock = 8;
// The largest pooling window computed with the convolution, in taps.
constexpr int64_t kMaxWindowTaps = 16;
using vec8::kLanes;
using Vec = vec8::Float;

// Adds image n's filter gradient of channels [c0, c0 + kLanes) to acc ([KH * KW, o]) and
// its bias gradient to bias_acc. The KH * KW sums stay in registers over the pixels whose
// taps are all inside the image; the others (at padded borders) add to `border`, which is
// indexed at run time and so lives in memory.
template <int KH, int KW, typename Source>
void channel_chunk(const float* x, const Source& source, const ConvGeometry& g, int64_t n,
                   int64_t c0, float* acc, float* bias_acc) {
  Vec sums[KH * KW] = {};
  Vec border[KH * KW] = {};
  Vec bias{};
  const float* image = x + n * g.h * g.w;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const int64_t top = oy - g.ph;
    const bool rows_inside = top >= 0 && top + KH <= g.h;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t left = ox - g.pw;
      const Vec grad = source.at(n, oy, ox, c0);
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
    for (int64_t k = 0; k < kLanes; ++k) acc[t * g.o + c0 + k] += total[k];
  }
  for (int64_t k = 0; k < kLanes; ++k) bias_acc[c0 + k] += bias[k];
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
        for (int64_t ky = std::max<int64_t>(0, -top); ky < std::min<int64_t>(g.kh, g.h - top); ++ky) {
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

// Output channels [c0, c0 + kLanes) of output pixel (oy, ox) of `image`: a sum of broadcast
// input values times the filter vectors, from `start` (the bias), then the ReLU.
template <int KH, int KW>
[[gnu::always_inline]] inline Vec output_at(const float* image, const Vec* filter, Vec start, bool relu, const ConvGeometry& g,
              int64_t oy, int64_t ox) {
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
  return relu ? vec8::select(sum > 0.f, sum, Vec{}) : sum;
}

// The same for P output pixels at once, whose sums are independent: one pixel's sum is a
// chain of dependent multiply-adds, so P of them interleaved keep the arithmetic units
// busy. Each sum is added in the same order as output_at's, so the bits are the same. The
// filter vectors are read from `taps` (the filter at channel c0) tap by tap rather than
// held, so that the P sums have the registers.
template <int KH, int KW, int P>
[[gnu::always_inline]] inline void outputs_at(const float* image, const Vec* filter,
                                              const float* taps, Vec start, bool relu,
                                              const ConvGeometry& g, const int64_t (&oy)[P],
                                              const int64_t (&ox)[P], Vec (&out)[P]) {
  const float* in[P];
  for (int p = 0; p < P; ++p) {
    const int64_t top = oy[p] - g.ph, left = ox[p] - g.pw;
    if (top < 0 || top + KH > g.h || left < 0 || left + KW > g.w) {
      for (int q = 0; q < P; ++q) out[q] = output_at<KH, KW>(image, filter, start, relu, g, oy[q], ox[q]);
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
      const Vec f = vec8::load<Vec>(taps + (ky * KW + kx) * g.o);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) sum[p] += in[p][ky * g.w + kx] * f;
    }
  }
  for (int p = 0; p < P; ++p) out[p] = relu ? vec8::select(sum[p] > 0.f, sum[p], Vec{}) : sum[p];
}

// Image n's output channels [c0, c0 + kLanes), with the KH * KW filter vectors in
// registers. Without a pooling, every output pixel is stored; with one (windows that tile
// the output, no padding), each window's maximum and its tap, as max pooling finds them:
// the first tap, then a strictly greater value.
template <int KH, int KW>
void forward_chunk(const float* x, const float* w, const float* bias, bool relu,
                   const ConvGeometry& g, const kernels::Pool2DParams* pool, int64_t n,
                   int64_t c0, float* y, int32_t* argmax, int64_t ph, int64_t pw) {
  Vec filter[KH * KW];
  for (int t = 0; t < KH * KW; ++t) filter[t] = vec8::load<Vec>(w + t * g.o + c0);
  const Vec start = bias != nullptr ? vec8::load<Vec>(bias + c0) : Vec{};
  const float* image = x + n * g.h * g.w;
  if (pool == nullptr) {
    float* out = y + n * g.oh * g.ow * g.o + c0;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      int64_t ox = 0;
      for (; ox + 8 <= g.ow; ox += 8, out += 8 * g.o) {
        Vec sums[8];
        outputs_at<KH, KW, 8>(image, filter, w + c0, start, relu, g, {oy, oy, oy, oy, oy, oy, oy, oy},
                              {ox, ox + 1, ox + 2, ox + 3, ox + 4, ox + 5, ox + 6, ox + 7}, sums);
        for (int p = 0; p < 8; ++p) vec8::store(out + p * g.o, sums[p]);
      }
      for (; ox < g.ow; ++ox, out += g.o) {
        vec8::store(out, output_at<KH, KW>(image, filter, start, relu, g, oy, ox));
      }
    }
    return;
  }
  const int64_t wh = pool->window[0], ww = pool->window[1];
  const int64_t offset = n * ph * pw * g.o + c0;
  // A window's outputs `v` in tap order: the first, then a strictly greater value wins.
  auto store_max = [&](const Vec* v, int64_t taps, int64_t py, int64_t px) {
    Vec best = v[0];
    vec8::Int where{};
    for (int64_t t = 1; t < taps; ++t) {
      const vec8::Int greater = v[t] > best;
      best = vec8::select(greater, v[t], best);
      where = vec8::select(greater, vec8::Int{} + static_cast<int32_t>(t), where);
    }
    const int64_t at = offset + (py * pw + px) * g.o;
    vec8::store(y + at, best);
    vec8::store(argmax + at, where);
  };
  for (int64_t py = 0; py < ph; ++py) {
    const int64_t top = py * wh;
    int64_t px = 0;
    if (wh == 2 && ww == 2) {
      // Two windows at once.
      for (; px + 2 <= pw; px += 2) {
        const int64_t left = px * 2;
        Vec v[8];
        outputs_at<KH, KW, 8>(image, filter, w + c0, start, relu, g,
                              {top, top, top + 1, top + 1, top, top, top + 1, top + 1},
                              {left, left + 1, left, left + 1, left + 2, left + 3, left + 2, left + 3}, v);
        store_max(v, 4, py, px);
        store_max(v + 4, 4, py, px + 1);
      }
    }
    for (; px < pw; ++px) {
      const int64_t left = px * ww;
      Vec v[kMaxWindowTaps];
      for (int64_t wy = 0; wy < wh; ++wy) {
        for (int64_t wx = 0; wx < ww; ++wx) {
          v[wy * ww + wx] = output_at<KH, KW>(image, filter, start, relu, g, top + wy, left + wx);
        }
      }
      store_max(v, wh * ww, py, px);
    }
  }
}

template <int KH, int KW>
void forward_images(const float* x, const float* w, const float* bias, bool relu,
                    const ConvGeometry& g, const kernels::Pool2DParams* pool, float* y,
                    int32_t* argmax, int64_t ph, int64_t pw) {
  parallel_for(0, g.n, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      for (int64_t c0 = 0; c0 < g.o; c0 += kLanes) {
        forward_chunk<KH, KW>(x, w, bias, relu, g, pool, n, c0, y, argmax, ph, pw);
      }
    }
  });
}

void forward_any(const Tensor& x, const Tensor& w, const Tensor& bias,
                 kernels::Activation activation, const ConvGeometry& g,
                 const kernels::Pool2DParams* pool, Tensor& y, int32_t* argmax) {
  const float* pb = bias.defined() ? typed<float>(bias) : nullptr;
  const bool relu = activation == kernels::Activation::kRelu;
  const int64_t ph = y.shape()[1], pw = y.shape()[2];
  auto images = g.kh == 3 ? &forward_images<3, 3> : &forward_images<2, 2>;
  images(typed<float>(x), typed<float>(w), pb, relu, g, pool, typed_mut<float>(y), argmax, ph, pw);
}

// Image by image, so that the image's gradient is still in cache for its later chunks.
template <int KH, int KW, typename Source>
void chunks(const float* x, const Source& source, const ConvGeometry& g, int64_t first,
            int64_t last, float* acc, float* bias_acc) {
  for (int64_t n = first; n < last; ++n) {
    for (int64_t c0 = 0; c0 < g.o; c0 += kLanes) {
      channel_chunk<KH, KW>(x, source, g, n, c0, acc, bias_acc);
    }
  }
}

// The filter sizes and channel counts whose sums stay in registers.
bool in_registers(const ConvGeometry& g) {
  return g.o % kLanes == 0 && ((g.kh == 3 && g.kw == 3) || (g.kh == 2 && g.kw == 2));
}

// Images [first, last) of a block, in registers where in_registers(g).
template <typename Source>
void block(const float* x, const Source& source, const ConvGeometry& g, int64_t first,
           int64_t last, float* acc, float* bias_acc) {
  if (g.kh == 3) return chunks<3, 3>(x, source, g, first, last, acc, bias_acc);
  chunks<2, 2>(x, source, g, first, last, acc, bias_acc);
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
  if (db.defined()) std::memcpy(typed_mut<float>(db), partial.data() + taps * g.o, g.o * sizeof(float));
}

}  // namespace

bool forward_suits(const ConvGeometry& g) { return suits(g) && in_registers(g); }

void forward(const Tensor& x, const Tensor& w, const Tensor& bias, kernels::Activation activation,
             Tensor& y, const ConvGeometry& g) {
  forward_any(x, w, bias, activation, g, nullptr, y, nullptr);
}

bool forward_max_pool_suits(const ConvGeometry& g, const kernels::Pool2DParams& pool) {
  const bool no_padding = pool.pad_begin == std::array<int64_t, 2>{0, 0} &&
                          pool.pad_end == std::array<int64_t, 2>{0, 0};
  return forward_suits(g) && pool.kind == kernels::PoolKind::kMax && pool.strides == pool.window &&
         no_padding && pool.window[0] <= g.oh && pool.window[1] <= g.ow &&
         pool.window[0] * pool.window[1] <= kMaxWindowTaps;
}

void forward_max_pool(const Tensor& x, const Tensor& w, const Tensor& bias,
                      kernels::Activation activation, const kernels::Pool2DParams& pool, Tensor& y,
                      Tensor& argmax, const ConvGeometry& g) {
  forward_any(x, w, bias, activation, g, &pool, y, typed_mut<int32_t>(argmax));
}

bool suits(const ConvGeometry& g) {
  return g.c == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}

void filter_grad(const Tensor& x, const Tensor& dy, const Tensor& y,
                 kernels::Activation activation, Tensor& dw, Tensor& db, const ConvGeometry& g) {
  const float* px = typed<float>(x);
  const float* pg = typed<float>(dy);
  const float* py = activation == kernels::Activation::kRelu ? typed<float>(y) : nullptr;
  sum_blocks(g, dw, db, [&](int64_t first, int64_t last, float* acc, float* bias_acc) {
    if (in_registers(g)) return block(px, DenseOutputGrad(pg, py, g), g, first, last, acc, bias_acc);
    any_shape(px, pg, py, g, first, last, acc, bias_acc);
  });
}

bool filter_grad_from_max_pool_suits(const ConvGeometry& g) { return suits(g) && in_registers(g); }

void filter_grad(const Tensor& x, const kernels::MaxPoolInputGrad& grad,
                 kernels::Activation activation, Tensor& dw, Tensor& db, const ConvGeometry& g) {
  const float* px = typed<float>(x);
  const MaxPoolOutputGrad source(grad, activation == kernels::Activation::kRelu, g);
  sum_blocks(g, dw, db, [&](int64_t first, int64_t last, float* acc, float* bias_acc) {
    block(px, source, g, first, last, acc, bias_acc);
  });
}

}  // namespace cadre::backend::cpu::conv_one_channel
