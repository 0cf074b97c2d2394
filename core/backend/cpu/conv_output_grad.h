// The gradient of a float32 convolution's output before its fused activation, as the
// gradient kernels read it (a vector of channels at a time, or a pixel's channels at once),
// in one of two forms:
// - Dense: dy, the gradient of the activation's output, masked where the ReLU's output is
//   not positive.
// - FromMaxPool: the convolution's output went into a max pooling whose windows tile it;
//   a pixel's gradient is its window's output gradient where it held the maximum and zero
//   elsewhere (and outside every window), masked where the pooled value (the maximum) is
//   not positive. That is the value the pooling's backward pass and the ReLU's gradient give
//   together, bit for bit, without the input-sized tensor between them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend/cpu/lanes.h"
#include "core/backend/portable/conv_ops.h"
#include "core/kernels/nn.h"

// at() returns 16-lane values in the AVX-512 loops, into which it is always inlined (see
// lanes.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cadre::backend::cpu {

class DenseOutputGrad {
 public:
  // y: the ReLU's output, or null without one.
  DenseOutputGrad(const float* dy, const float* y, const portable::ConvGeometry& g)
      : dy_(dy), y_(y), pixels_(g.oh * g.ow), ow_(g.ow), o_(g.o) {}

  // Channels [c0, c0 + L::kLanes) of image n's output pixel (oy, ox).
  template <typename L>
  [[gnu::always_inline]] typename L::Float at(int64_t n, int64_t oy, int64_t ox, int64_t c0) const {
    using F = typename L::Float;
    const int64_t offset = (n * pixels_ + oy * ow_ + ox) * o_ + c0;
    const F g = lanes::load<F>(dy_ + offset);
    return y_ == nullptr ? g : lanes::relu_gradient(lanes::load<F>(y_ + offset), g);
  }
  // Output pixels [r0, r1) (flat over images, rows, columns), all channels, row-major into
  // `buffer`; returns where they are (dy itself when there is nothing to mask).
  const float* rows(int64_t r0, int64_t r1, float* buffer) const;

 private:
  const float* dy_;
  const float* y_;
  int64_t pixels_, ow_, o_;
};

class MaxPoolOutputGrad {
 public:
  // `relu`: the convolution's activation is a ReLU (masked by the pooled value).
  MaxPoolOutputGrad(const kernels::MaxPoolInputGrad& grad, bool relu,
                    const portable::ConvGeometry& g);

  template <typename L>
  [[gnu::always_inline]] typename L::Float at(int64_t n, int64_t oy, int64_t ox, int64_t c0) const {
    using F = typename L::Float;
    using I = typename L::Int;
    const int64_t py = row_window_[oy], px = column_window_[ox];
    if (py < 0 || px < 0) return F{};
    const int64_t offset = ((n * ph_ + py) * pw_ + px) * o_ + c0;
    const I hit = lanes::load<I>(argmax_ + offset) == row_tap_[oy] + column_tap_[ox];
    const F g = lanes::select(hit, lanes::load<F>(dy_ + offset), F{});
    return pooled_ == nullptr ? g : lanes::relu_gradient(lanes::load<F>(pooled_ + offset), g);
  }
  const float* rows(int64_t r0, int64_t r1, float* buffer) const;

 private:
  float scalar_at(int64_t n, int64_t oy, int64_t ox, int64_t c) const;

  const float* dy_;
  const int32_t* argmax_;
  const float* pooled_;  // null without a ReLU
  int64_t ph_, pw_, o_, oh_, ow_;
  // Per output row (column) of the convolution: the window row (column) it falls in, or -1
  // outside every window, and its tap's row term (column term) within the window.
  std::vector<int64_t> row_window_, column_window_;
  std::vector<int32_t> row_tap_, column_tap_;
};

}  // namespace cadre::backend::cpu

#pragma GCC diagnostic pop
