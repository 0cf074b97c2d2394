// Index math of the CUDA convolution and pooling kernels (NHWC images, HWIO filters).
//
// Convolution is a matrix product over an im2col matrix: row (n, oy, ox) of `cols` holds
// the taps of output pixel (n, oy, ox) in the order of the flattened filter
// [KH * KW * C, O], so y [N*OH*OW, O] = cols · w needs no filter reorder, and
// dw = cols^T · dy, dcols = dy · w^T. col2im gathers dcols back into dx: each input element
// sums the taps that read it, in a fixed order, without atomics.
//
// Pooling follows the CPU kernels (core/backend/cpu/pool_kernels.cc) element for element;
// the backward gathers, for each input element, the output windows that cover it in the
// CPU's (oy, ox) order, so sums round identically.
#pragma once

#include <cstdint>

#include "core/backend/portable/scalar_math.h"
#include "core/base/host_device.h"
#include "core/kernels/nn.h"

namespace cadre::backend::portable {

struct ConvGeometry {
  int64_t n, h, w, c;  // input
  int64_t kh, kw, o;   // filter
  int64_t oh, ow;      // output
  int64_t sh, sw;      // strides
  int64_t dh, dw;      // dilations
  int64_t ph, pw;      // padding before (rows, columns)

  CADRE_HOST_DEVICE int64_t taps() const { return kh * kw * c; }  // columns of cols
};

inline ConvGeometry conv_geometry(const Shape& x, const Shape& w, const Shape& y,
                                  const kernels::Conv2DParams& p) {
  return {x[0],         x[1],           x[2],           x[3],           w[0],
          w[1],         w[3],           y[1],           y[2],           p.strides[0],
          p.strides[1], p.dilations[0], p.dilations[1], p.pad_begin[0], p.pad_begin[1]};
}

// True when cols would equal x itself: 1x1 filter, unit stride, no padding.
inline bool conv_is_pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
         g.oh == g.h && g.ow == g.w;
}

// cols[i] for i over [rows, taps] where rows start at image `n0` (a chunk of the batch).
template <typename T>
struct Im2ColElement {
  const T* x;
  T* cols;
  ConvGeometry g;
  int64_t n0;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t taps = g.taps();
    int64_t row = i / taps, col = i - row * taps;
    int64_t c = col % g.c, k = col / g.c;
    int64_t kx = k % g.kw, ky = k / g.kw;
    int64_t ox = row % g.ow, rest = row / g.ow;
    int64_t oy = rest % g.oh, n = n0 + rest / g.oh;
    int64_t iy = oy * g.sh - g.ph + ky * g.dh;
    int64_t ix = ox * g.sw - g.pw + kx * g.dw;
    bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    cols[i] = inside ? x[((n * g.h + iy) * g.w + ix) * g.c + c] : T(0);
  }
};

// dx[i] for i over the input elements of images [n0, n0 + count): the sum of the dcols
// entries (rows relative to image n0) that im2col read it into.
template <typename T>
struct Col2ImElement {
  const T* dcols;
  T* dx;
  ConvGeometry g;
  int64_t n0;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t c = i % g.c, rest = i / g.c;
    int64_t ix = rest % g.w;
    rest /= g.w;
    int64_t iy = rest % g.h, n = rest / g.h;  // n relative to n0
    T sum = 0;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      int64_t ty = iy + g.ph - ky * g.dh;  // = oy * sh when a tap of row oy reads iy
      if (ty < 0 || ty % g.sh != 0) continue;
      int64_t oy = ty / g.sh;
      if (oy >= g.oh) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        int64_t tx = ix + g.pw - kx * g.dw;
        if (tx < 0 || tx % g.sw != 0) continue;
        int64_t ox = tx / g.sw;
        if (ox >= g.ow) continue;
        int64_t row = (n * g.oh + oy) * g.ow + ox;
        sum += dcols[row * g.taps() + (ky * g.kw + kx) * g.c + c];
      }
    }
    dx[(n0 * g.h * g.w * g.c) + i] = sum;
  }
};

struct PoolGeometry {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw;
  bool max;
};

inline PoolGeometry pool_geometry(const Shape& x, const Shape& y, const kernels::Pool2DParams& p) {
  return {x[0],
          x[1],
          x[2],
          x[3],
          y[1],
          y[2],
          p.window[0],
          p.window[1],
          p.strides[0],
          p.strides[1],
          p.pad_begin[0],
          p.pad_begin[1],
          p.kind == kernels::PoolKind::kMax};
}

// The input rows [y0, y1) and columns [x0, x1) of output window (oy, ox), and its origin.
struct PoolWindow {
  int64_t y0, y1, x0, x1, top, left;
};

CADRE_HOST_DEVICE inline PoolWindow pool_window(const PoolGeometry& g, int64_t oy, int64_t ox) {
  PoolWindow win;
  win.top = oy * g.sh - g.ph;
  win.left = ox * g.sw - g.pw;
  win.y0 = win.top > 0 ? win.top : 0;
  win.y1 = win.top + g.kh < g.h ? win.top + g.kh : g.h;
  win.x0 = win.left > 0 ? win.left : 0;
  win.x1 = win.left + g.kw < g.w ? win.left + g.kw : g.w;
  return win;
}

// y[i] (and argmax[i] for max pooling) for i over [N, OH, OW, C].
template <typename T>
struct PoolElement {
  const T* x;
  T* y;
  int32_t* argmax;
  PoolGeometry g;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t k = i % g.c, rest = i / g.c;
    int64_t ox = rest % g.ow;
    rest /= g.ow;
    int64_t oy = rest % g.oh, img = rest / g.oh;
    PoolWindow win = pool_window(g, oy, ox);
    const T* base = x + img * g.h * g.w * g.c + k;
    if (g.max) {
      T best = 0;
      int32_t arg = 0;
      bool first = true;
      for (int64_t iy = win.y0; iy < win.y1; ++iy) {
        for (int64_t ix = win.x0; ix < win.x1; ++ix) {
          T v = base[(iy * g.w + ix) * g.c];
          if (first || v > best) {
            best = v;
            arg = static_cast<int32_t>((iy - win.top) * g.kw + (ix - win.left));
          }
          first = false;
        }
      }
      if (first) best = -infinity<T>();  // an empty window, as the CPU leaves it
      y[i] = best;
      argmax[i] = arg;
    } else {
      T sum = 0;
      for (int64_t iy = win.y0; iy < win.y1; ++iy) {
        for (int64_t ix = win.x0; ix < win.x1; ++ix) sum += base[(iy * g.w + ix) * g.c];
      }
      y[i] = sum / static_cast<T>((win.y1 - win.y0) * (win.x1 - win.x0));
    }
  }
};

// dx[i] for i over [N, H, W, C]: the gradients of every window that covers it.
template <typename T>
struct PoolGradElement {
  const T* dy;
  const int32_t* argmax;
  T* dx;
  PoolGeometry g;
  // Max pooling over a ReLU's output, when set: the pooled values. A window passes its
  // gradient to its maximum only where that value is positive, which is the ReLU's
  // gradient at that element (the element holds the pooled value), so that dx is the
  // gradient before the ReLU: (pooling's gradient) * (y > 0), bit for bit.
  const T* relu_pooled = nullptr;
  CADRE_HOST_DEVICE void operator()(int64_t i) const {
    int64_t k = i % g.c, rest = i / g.c;
    int64_t ix = rest % g.w;
    rest /= g.w;
    int64_t iy = rest % g.h, img = rest / g.h;
    // Windows (oy, ox) with top <= iy < top + kh, i.e. oy in [ceil((iy + ph - kh + 1) / sh),
    // floor((iy + ph) / sh)], clamped to the output.
    int64_t oy_lo = floor_div(iy + g.ph - g.kh + 1 + g.sh - 1, g.sh);
    int64_t oy_hi = floor_div(iy + g.ph, g.sh);
    int64_t ox_lo = floor_div(ix + g.pw - g.kw + 1 + g.sw - 1, g.sw);
    int64_t ox_hi = floor_div(ix + g.pw, g.sw);
    if (oy_lo < 0) oy_lo = 0;
    if (ox_lo < 0) ox_lo = 0;
    if (oy_hi > g.oh - 1) oy_hi = g.oh - 1;
    if (ox_hi > g.ow - 1) ox_hi = g.ow - 1;
    T sum = 0;
    for (int64_t oy = oy_lo; oy <= oy_hi; ++oy) {
      for (int64_t ox = ox_lo; ox <= ox_hi; ++ox) {
        int64_t out = ((img * g.oh + oy) * g.ow + ox) * g.c + k;
        PoolWindow win = pool_window(g, oy, ox);
        if (g.max) {
          int32_t tap = static_cast<int32_t>((iy - win.top) * g.kw + (ix - win.left));
          if (argmax[out] == tap && (relu_pooled == nullptr || relu_pooled[out] > T(0))) {
            sum += dy[out];
          }
        } else {
          sum += dy[out] / static_cast<T>((win.y1 - win.y0) * (win.x1 - win.x0));
        }
      }
    }
    dx[i] = sum;
  }

  CADRE_HOST_DEVICE static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
};

}  // namespace cadre::backend::portable
