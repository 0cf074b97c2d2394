// The one-channel convolution's filter and bias gradients (conv_one_channel.h), summed per
// block of images with the sums in registers where the filter size allows.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/cpu/conv_one_channel.h"
#include "core/backend/cpu/conv_one_channel_lanes.h"
#include "core/backend/cpu/conv_output_grad.h"
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

}  // namespace cadre::backend::cpu::conv_one_channel
