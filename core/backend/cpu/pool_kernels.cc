// CPU 2-D max and average pooling over NHWC images, vectorised along channels.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/vec8.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Pool2DParams;
using kernels::PoolKind;

struct Window {
  int64_t y0, y1, x0, x1;  // input rows [y0, y1) and columns [x0, x1) inside the image
  int64_t top, left;       // input position of the window's (0, 0) tap
};

Window window_at(const Pool2DParams& p, int64_t oy, int64_t ox, int64_t h, int64_t w) {
  Window win;
  win.top = oy * p.strides[0] - p.pad_begin[0];
  win.left = ox * p.strides[1] - p.pad_begin[1];
  win.y0 = std::max<int64_t>(win.top, 0);
  win.y1 = std::min<int64_t>(win.top + p.window[0], h);
  win.x0 = std::max<int64_t>(win.left, 0);
  win.x1 = std::min<int64_t>(win.left + p.window[1], w);
  return win;
}

// One window's maximum and its tap over channels in groups of vec8::kLanes: the first tap,
// then a strictly greater value wins (a NaN never does), with selects in registers.
void max_window_in_lanes(const float* image, int64_t w, int64_t c, const Window& win,
                         const Pool2DParams& p, float* best, int32_t* arg) {
  using vec8::Float;
  using vec8::Int;
  for (int64_t k = 0; k < c; k += vec8::kLanes) {
    Float top = vec8::load<Float>(image + (win.y0 * w + win.x0) * c + k);
    Int where =
        Int{} + static_cast<int32_t>((win.y0 - win.top) * p.window[1] + (win.x0 - win.left));
    for (int64_t iy = win.y0; iy < win.y1; ++iy) {
      for (int64_t ix = iy == win.y0 ? win.x0 + 1 : win.x0; ix < win.x1; ++ix) {
        const Float v = vec8::load<Float>(image + (iy * w + ix) * c + k);
        const Int greater = v > top;
        top = vec8::select(greater, v, top);
        where = vec8::select(
            greater, Int{} + static_cast<int32_t>((iy - win.top) * p.window[1] + (ix - win.left)),
            where);
      }
    }
    vec8::store(best + k, top);
    vec8::store(arg + k, where);
  }
}

template <typename T>
void pool(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2DParams& p) {
  int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], c = x.shape()[3];
  int64_t oh = y.shape()[1], ow = y.shape()[2];
  const T* px = typed<T>(x);
  T* py = typed_mut<T>(y);
  int32_t* pa = argmax.defined() ? typed_mut<int32_t>(argmax) : nullptr;
  parallel_for(
      0, n * oh, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ow * c)),
      [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          int64_t img = row / oh, oy = row % oh;
          for (int64_t ox = 0; ox < ow; ++ox) {
            Window win = window_at(p, oy, ox, h, w);
            T* out = py + ((img * oh + oy) * ow + ox) * c;
            if (p.kind == PoolKind::kMax) {
              T* __restrict best = out;
              int32_t* __restrict arg = pa + ((img * oh + oy) * ow + ox) * c;
              if (win.y0 >= win.y1 || win.x0 >= win.x1) {  // no tap inside the image
                std::fill(best, best + c, -std::numeric_limits<T>::infinity());
                std::fill(arg, arg + c, 0);
                continue;
              }
              // The first tap, then a strictly greater value wins (a NaN never does): selects
              // rather than branches, so that the channel loop vectorises.
              auto tap_of = [&](int64_t iy, int64_t ix) {
                return static_cast<int32_t>((iy - win.top) * p.window[1] + (ix - win.left));
              };
              const T* __restrict first = px + ((img * h + win.y0) * w + win.x0) * c;
              const int32_t first_tap = tap_of(win.y0, win.x0);
              if constexpr (std::is_same_v<T, float>) {
                if (c % vec8::kLanes == 0) {
                  max_window_in_lanes(px + img * h * w * c, w, c, win, p, best, arg);
                  continue;
                }
              }
              for (int64_t k = 0; k < c; ++k) {
                best[k] = first[k];
                arg[k] = first_tap;
              }
              for (int64_t iy = win.y0; iy < win.y1; ++iy) {
                for (int64_t ix = iy == win.y0 ? win.x0 + 1 : win.x0; ix < win.x1; ++ix) {
                  const T* __restrict in = px + ((img * h + iy) * w + ix) * c;
                  const int32_t tap = tap_of(iy, ix);
                  for (int64_t k = 0; k < c; ++k) {
                    const bool greater = in[k] > best[k];
                    best[k] = greater ? in[k] : best[k];
                    arg[k] = greater ? tap : arg[k];
                  }
                }
              }
            } else {
              for (int64_t k = 0; k < c; ++k) out[k] = T(0);
              for (int64_t iy = win.y0; iy < win.y1; ++iy) {
                for (int64_t ix = win.x0; ix < win.x1; ++ix) {
                  const T* in = px + ((img * h + iy) * w + ix) * c;
                  for (int64_t k = 0; k < c; ++k) out[k] += in[k];
                }
              }
              T count = static_cast<T>((win.y1 - win.y0) * (win.x1 - win.x0));
              for (int64_t k = 0; k < c; ++k) out[k] /= count;
            }
          }
        }
      });
}

// Max pooling's gradient when the windows tile the image (strides equal to the window,
// as in the usual 2x2 pooling): each input element is written once, its window's gradient
// where it was the maximum and zero elsewhere, instead of zeroing the whole input gradient
// and then adding into it.
template <typename T>
void max_pool_grad_tiled(const T* pg, const int32_t* pa, T* pd, const Pool2DParams& p, int64_t n,
                         int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow) {
  // Windows cover rows [-pad, oh * stride - pad) and likewise columns; the rest gets zeros.
  const int64_t covered_h = std::min(h, oh * p.strides[0] - p.pad_begin[0]);
  const int64_t covered_w = std::min(w, ow * p.strides[1] - p.pad_begin[1]);
  parallel_for(0, n * oh, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ow * c)),
               [&](int64_t b, int64_t e) {
                 for (int64_t row = b; row < e; ++row) {
                   const int64_t img = row / oh, oy = row % oh;
                   T* image = pd + img * h * w * c;
                   for (int64_t ox = 0; ox < ow; ++ox) {
                     Window win = window_at(p, oy, ox, h, w);
                     const T* __restrict g = pg + ((img * oh + oy) * ow + ox) * c;
                     const int32_t* __restrict arg = pa + ((img * oh + oy) * ow + ox) * c;
                     for (int64_t iy = win.y0; iy < win.y1; ++iy) {
                       for (int64_t ix = win.x0; ix < win.x1; ++ix) {
                         const int32_t tap =
                             static_cast<int32_t>((iy - win.top) * p.window[1] + (ix - win.left));
                         T* __restrict d = image + (iy * w + ix) * c;
                         int64_t k = 0;
                         if constexpr (std::is_same_v<T, float>) {
                           // Explicit selects: the vectoriser would make a masked load of g.
                           for (; k + vec8::kLanes <= c; k += vec8::kLanes) {
                             const vec8::Int hit = vec8::load<vec8::Int>(arg + k) == tap;
                             vec8::store(d + k, vec8::select(hit, vec8::load<vec8::Float>(g + k),
                                                             vec8::Float{}));
                           }
                         }
                         for (; k < c; ++k) d[k] = arg[k] == tap ? g[k] : T(0);
                       }
                     }
                   }
                   // The columns right of the last window, on this window row's input rows.
                   const int64_t top = oy * p.strides[0] - p.pad_begin[0];
                   const int64_t y0 = std::max<int64_t>(0, top);
                   const int64_t y1 = std::min(covered_h, top + p.window[0]);
                   for (int64_t iy = y0; iy < y1 && covered_w < w; ++iy) {
                     std::fill(image + (iy * w + covered_w) * c, image + (iy + 1) * w * c, T(0));
                   }
                   // The rows below the last window row, with the image's last window row.
                   if (oy == oh - 1 && covered_h < h) {
                     std::fill(image + covered_h * w * c, image + h * w * c, T(0));
                   }
                 }
               });
}

template <typename T>
void pool_grad(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2DParams& p) {
  int64_t n = dx.shape()[0], h = dx.shape()[1], w = dx.shape()[2], c = dx.shape()[3];
  int64_t oh = dy.shape()[1], ow = dy.shape()[2];
  const T* pg = typed<T>(dy);
  const int32_t* pa = argmax.defined() ? typed<int32_t>(argmax) : nullptr;
  T* pd = typed_mut<T>(dx);
  if (p.kind == PoolKind::kMax && p.strides == p.window) {
    return max_pool_grad_tiled(pg, pa, pd, p, n, h, w, c, oh, ow);
  }
  // One image per task: windows overlap only within an image.
  parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t img = b; img < e; ++img) {
      std::fill(pd + img * h * w * c, pd + (img + 1) * h * w * c, T(0));
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          Window win = window_at(p, oy, ox, h, w);
          const T* g = pg + ((img * oh + oy) * ow + ox) * c;
          if (p.kind == PoolKind::kMax) {
            const int32_t* arg = pa + ((img * oh + oy) * ow + ox) * c;
            for (int64_t k = 0; k < c; ++k) {
              int64_t iy = win.top + arg[k] / p.window[1];
              int64_t ix = win.left + arg[k] % p.window[1];
              pd[((img * h + iy) * w + ix) * c + k] += g[k];
            }
          } else {
            T count = static_cast<T>((win.y1 - win.y0) * (win.x1 - win.x0));
            for (int64_t iy = win.y0; iy < win.y1; ++iy) {
              for (int64_t ix = win.x0; ix < win.x1; ++ix) {
                T* d = pd + ((img * h + iy) * w + ix) * c;
                for (int64_t k = 0; k < c; ++k) d[k] += g[k] / count;
              }
            }
          }
        }
      }
    }
  });
}

void pool2d(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2DParams& p) {
  visit_float_dtype(x.dtype(), "pool2d", [&]<typename T>() { pool<T>(x, y, argmax, p); });
}

void pool2d_grad(const Tensor& dy, const Tensor& argmax, Tensor& dx, const Pool2DParams& p) {
  visit_float_dtype(dy.dtype(), "pool2d_grad",
                    [&]<typename T>() { pool_grad<T>(dy, argmax, dx, p); });
}

}  // namespace

void register_pool_kernels() {
  kernels::pool2d.set(DeviceType::kCPU, &pool2d);
  kernels::pool2d_grad.set(DeviceType::kCPU, &pool2d_grad);
}

}  // namespace cadre::backend::cpu
