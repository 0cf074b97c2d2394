#include "core/backend/cpu/conv_direct.h"

#include <algorithm>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/portable/conv_ops.h"
#include "core/runtime/parallel_for.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Activation;
using kernels::Conv2DParams;
using Geometry = portable::ConvGeometry;

// Calls fn(input_offset, filter_offset) for each tap of output pixel (n, oy, ox) that
// falls inside the image (padding contributes nothing).
template <typename Fn>
void for_each_tap(const Geometry& g, const Conv2DParams& p, int64_t n, int64_t oy, int64_t ox,
                  Fn&& fn) {
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    int64_t iy = oy * p.strides[0] - p.pad_begin[0] + ky * p.dilations[0];
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      int64_t ix = ox * p.strides[1] - p.pad_begin[1] + kx * p.dilations[1];
      if (ix < 0 || ix >= g.w) continue;
      fn(((n * g.h + iy) * g.w + ix) * g.c, (ky * g.kw + kx) * g.c * g.o);
    }
  }
}

template <typename T>
void conv2d_direct(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                   const Conv2DParams& p) {
  Geometry g = portable::conv_geometry(x.shape(), w.shape(), y.shape(), p);
  const T* px = typed<T>(x);
  const T* pw = typed<T>(w);
  const T* pb = bias.defined() ? typed<T>(bias) : nullptr;
  T* py = typed_mut<T>(y);
  parallel_for(0, g.n * g.oh, 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t n = row / g.oh, oy = row % g.oh;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        T* out = py + ((n * g.oh + oy) * g.ow + ox) * g.o;
        for (int64_t o = 0; o < g.o; ++o) out[o] = pb != nullptr ? pb[o] : T(0);
        for_each_tap(g, p, n, oy, ox, [&](int64_t in, int64_t filt) {
          for (int64_t c = 0; c < g.c; ++c) {
            for (int64_t o = 0; o < g.o; ++o) out[o] += px[in + c] * pw[filt + c * g.o + o];
          }
        });
        if (p.activation == Activation::kRelu) {
          for (int64_t o = 0; o < g.o; ++o) out[o] = out[o] > T(0) ? out[o] : T(0);
        }
      }
    }
  });
}

template <typename T>
void conv2d_grad_direct(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                        Tensor& db, const Conv2DParams& p) {
  Geometry g = portable::conv_geometry(x.shape(), w.shape(), dy.shape(), p);
  const T* px = typed<T>(x);
  const T* pw = typed<T>(w);
  const T* pg = typed<T>(dy);
  // fn(output_offset, input_offset, filter_offset) for every in-image tap of image n.
  auto for_each_image_tap = [&](int64_t n, auto&& fn) {
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.o;
        for_each_tap(g, p, n, oy, ox, [&](int64_t in, int64_t filt) { fn(out, in, filt); });
      }
    }
  };
  if (dx.defined()) {
    T* pdx = typed_mut<T>(dx);
    std::fill(pdx, pdx + dx.numel(), T(0));
    parallel_for(0, g.n, 1, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        for_each_image_tap(n, [&](int64_t out, int64_t in, int64_t filt) {
          for (int64_t c = 0; c < g.c; ++c) {
            T acc = 0;
            for (int64_t o = 0; o < g.o; ++o) acc += pg[out + o] * pw[filt + c * g.o + o];
            pdx[in + c] += acc;
          }
        });
      }
    });
  }
  if (dw.defined()) {
    T* pdw = typed_mut<T>(dw);
    std::fill(pdw, pdw + dw.numel(), T(0));
    for (int64_t n = 0; n < g.n; ++n) {
      for_each_image_tap(n, [&](int64_t out, int64_t in, int64_t filt) {
        for (int64_t c = 0; c < g.c; ++c) {
          for (int64_t o = 0; o < g.o; ++o) pdw[filt + c * g.o + o] += px[in + c] * pg[out + o];
        }
      });
    }
  }
  if (db.defined()) {
    T* pdb = typed_mut<T>(db);
    std::fill(pdb, pdb + g.o, T(0));
    for (int64_t i = 0; i < dy.numel() / g.o; ++i) {
      for (int64_t o = 0; o < g.o; ++o) pdb[o] += pg[i * g.o + o];
    }
  }
}

}  // namespace

void conv2d_f64(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                const Conv2DParams& p) {
  conv2d_direct<double>(x, w, bias, y, p);
}

void conv2d_grad_f64(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db, const Conv2DParams& p) {
  conv2d_grad_direct<double>(x, w, dy, dx, dw, db, p);
}

}  // namespace cadre::backend::cpu
