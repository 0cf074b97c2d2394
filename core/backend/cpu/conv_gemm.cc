#include "core/backend/cpu/conv_gemm.h"

#include <glog/logging.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cadre/runtime/threading.h"
#include "core/backend/cpu/conv_output_grad.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/vec8.h"

namespace cadre::backend::cpu::conv_gemm {
namespace {

using portable::ConvGeometry;

// A tile's rows of taps take at most this many bytes. A unit is cut into equal tiles: few
// large products amortise the product's packing (the CNN's second layer: 9.2 ms forward and
// backward with whole units of 968 rows, 9.7 ms with tiles of 455 rows and a remainder).
constexpr int64_t kTileBytes = int64_t{2} << 20;
// Work is split into units of whole images of about this many output pixels, or fewer
// so that there are at least kMinUnits of them (to balance the threads): each unit's filter
// gradient is summed on its own, then the units in order.
constexpr int64_t kUnitRows = 1024;
constexpr int64_t kMinUnits = 16;
// ... but the units' filter gradients together stay within this many bytes: large batches
// of large images get larger units.
constexpr int64_t kPartialBytes = int64_t{32} << 20;

// Floats of one unit's partial sums: the filter gradient, then a row of bias gradient.
int64_t partial_floats(const ConvGeometry& g) { return (g.taps() + 1) * g.o; }

// Row-major C = op(A) * op(B) (+ C when accumulate), on the calling thread only: the
// product's own threads would change the bits with the thread count and fight the caller's.
void gemm(char transpose_a, char transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  const int outer = omp_get_max_threads();
  const bool alone = outer > 1 && !omp_in_parallel();
  if (alone) omp_set_num_threads(1);
  dnnl_status_t status = dnnl_sgemm(transpose_a, transpose_b, m, n, k, 1.f, a, lda, b, ldb,
                                    accumulate ? 1.f : 0.f, c, ldc);
  if (alone) omp_set_num_threads(outer);
  CHECK(status == dnnl_success) << "dnnl_sgemm failed with status " << status;
}

// Calls fn(offset into a row of taps, input element offset, count) for the runs of taps of
// output pixel r that fall inside the image; a filter row's taps are one run when they are
// contiguous in the input.
template <typename Fn>
void for_each_run(const ConvGeometry& g, int64_t r, Fn&& fn) {
  const int64_t pixels = g.oh * g.ow;
  const int64_t n = r / pixels, oy = (r % pixels) / g.ow, ox = r % g.ow;
  const int64_t left = ox * g.sw - g.pw;
  const bool whole_rows = g.dw == 1 && left >= 0 && left + g.kw <= g.w;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    const int64_t row = (n * g.h + iy) * g.w;
    if (whole_rows) {
      fn(ky * g.kw * g.c, (row + left) * g.c, g.kw * g.c);
      continue;
    }
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = left + kx * g.dw;
      if (ix >= 0 && ix < g.w) fn((ky * g.kw + kx) * g.c, (row + ix) * g.c, g.c);
    }
  }
}

// Rows of taps of output pixels [r0, r1) (flattened over images, rows, columns), padding
// as zeros.
void im2col(const float* x, const ConvGeometry& g, int64_t r0, int64_t r1, float* col) {
  const int64_t taps = g.taps();
  const bool all_inside = g.ph == 0 && g.pw == 0 && (g.oh - 1) * g.sh + (g.kh - 1) * g.dh < g.h &&
                          (g.ow - 1) * g.sw + (g.kw - 1) * g.dw < g.w;
  for (int64_t r = r0; r < r1; ++r) {
    float* dst = col + (r - r0) * taps;
    if (!all_inside) std::memset(dst, 0, taps * sizeof(float));
    for_each_run(g, r, [&](int64_t tap, int64_t in, int64_t count) {
      std::memcpy(dst + tap, x + in, count * sizeof(float));
    });
  }
}

// Adds rows of tap gradients of output pixels [r0, r1) onto the input gradient.
void col2im_add(const float* col, const ConvGeometry& g, int64_t r0, int64_t r1, float* dx) {
  const int64_t taps = g.taps();
  for (int64_t r = r0; r < r1; ++r) {
    const float* src = col + (r - r0) * taps;
    for_each_run(g, r, [&](int64_t tap, int64_t in, int64_t count) {
      vec8::add_into(dx + in, src + tap, count);
    });
  }
}

// Buffers per thread, kept between calls.
float* thread_buffer(int which, int64_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[which];
  if (static_cast<int64_t>(buffer.size()) < floats) buffer.resize(floats);
  return buffer.data();
}

// `source` is a DenseOutputGrad or a MaxPoolOutputGrad.
template <typename Source>
void backward_from(const Tensor& x, const Tensor& w, const Source& source, Tensor& dx, Tensor& dw,
                   Tensor& db, const ConvGeometry& g) {
  const int64_t taps = g.taps(), pixels = g.oh * g.ow;
  const int64_t tile_rows =
      std::max<int64_t>(8, kTileBytes / (taps * static_cast<int64_t>(sizeof(float))));
  const int64_t stride = partial_floats(g);
  const int64_t max_units =
      std::max<int64_t>(1, kPartialBytes / (stride * static_cast<int64_t>(sizeof(float))));
  int64_t unit_images = std::max<int64_t>(
      1, std::min(kUnitRows / std::max<int64_t>(1, pixels), (g.n + kMinUnits - 1) / kMinUnits));
  if ((g.n + unit_images - 1) / unit_images > max_units) {
    unit_images = (g.n + max_units - 1) / max_units;
  }
  const int64_t units = (g.n + unit_images - 1) / unit_images;
  const float* px = typed<float>(x);
  const float* pw = typed<float>(w);
  float* pdx = dx.defined() ? typed_mut<float>(dx) : nullptr;
  const bool filters = dw.defined() || db.defined();
  // Per unit: taps rows of filter gradient, then one row of bias gradient.
  std::vector<float> partial(filters ? static_cast<size_t>(units * stride) : 0);
  const int64_t image = g.h * g.w * g.c;
  parallel_for(0, units, 1, [&](int64_t b, int64_t e) {
    float* col = thread_buffer(0, tile_rows * taps);
    float* tile = thread_buffer(1, tile_rows * g.o);
    for (int64_t unit = b; unit < e; ++unit) {
      const int64_t first = unit * unit_images, last = std::min(g.n, first + unit_images);
      // Units are whole images, so no two threads add onto the same input pixel.
      if (pdx != nullptr)
        std::memset(pdx + first * image, 0, (last - first) * image * sizeof(float));
      float* acc = filters ? partial.data() + unit * stride : nullptr;
      if (filters) std::fill(acc + taps * g.o, acc + stride, 0.f);
      const int64_t unit_rows = (last - first) * pixels;
      const int64_t tiles = (unit_rows + tile_rows - 1) / tile_rows;
      const int64_t step = (unit_rows + tiles - 1) / tiles;
      for (int64_t r0 = first * pixels; r0 < last * pixels; r0 += step) {
        const int64_t r1 = std::min(last * pixels, r0 + step), rows = r1 - r0;
        const float* grad = source.rows(r0, r1, tile);
        if (filters) {
          if (dw.defined()) {
            im2col(px, g, r0, r1, col);
            gemm('T', 'N', taps, g.o, rows, col, taps, grad, g.o, r0 != first * pixels, acc, g.o);
          }
          for (int64_t r = 0; r < rows; ++r) vec8::add_into(acc + taps * g.o, grad + r * g.o, g.o);
        }
        if (pdx != nullptr) {
          // Tap gradients: dy [rows, o] times w^T [o, taps] (w is [taps, o]).
          gemm('N', 'T', rows, taps, g.o, grad, g.o, pw, g.o, false, col, taps);
          col2im_add(col, g, r0, r1, pdx);
        }
      }
    }
  });
  if (!filters) return;
  // Each element sums the units in order, whichever thread does it.
  parallel_for(0, stride, 4096, [&](int64_t b, int64_t e) {
    for (int64_t unit = 1; unit < units; ++unit) {
      vec8::add_into(partial.data() + b, partial.data() + unit * stride + b, e - b);
    }
  });
  if (dw.defined()) std::memcpy(typed_mut<float>(dw), partial.data(), taps * g.o * sizeof(float));
  if (db.defined())
    std::memcpy(typed_mut<float>(db), partial.data() + taps * g.o, g.o * sizeof(float));
}

}  // namespace

bool suits(const ConvGeometry& g) {
  // Where the products measured at least even with oneDNN's backward primitives (plus
  // their separate ReLU pass): few input channels, at least twice as many outputs, no
  // padding in front (docs/BENCHMARKS.md#cpu-kernels). Elsewhere oneDNN was up to 25%
  // faster. Filters so large that fewer than 8 units' sums would fit are left to oneDNN
  // too.
  return g.c >= 8 && g.c <= 32 && g.o >= 2 * g.c && g.ph == 0 && g.pw == 0 &&
         partial_floats(g) * static_cast<int64_t>(sizeof(float)) * 8 <= kPartialBytes;
}

void backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
              kernels::Activation activation, Tensor& dx, Tensor& dw, Tensor& db,
              const ConvGeometry& g) {
  const float* py = activation == kernels::Activation::kRelu ? typed<float>(y) : nullptr;
  backward_from(x, w, DenseOutputGrad(typed<float>(dy), py, g), dx, dw, db, g);
}

void backward(const Tensor& x, const Tensor& w, const kernels::MaxPoolInputGrad& grad,
              kernels::Activation activation, Tensor& dx, Tensor& dw, Tensor& db,
              const ConvGeometry& g) {
  backward_from(x, w, MaxPoolOutputGrad(grad, activation == kernels::Activation::kRelu, g), dx, dw,
                db, g);
}

}  // namespace cadre::backend::cpu::conv_gemm
