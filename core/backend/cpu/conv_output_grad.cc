#include "core/backend/cpu/conv_output_grad.h"

#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/vec8.h"
#include "core/backend/portable/op_math.h"

namespace cadre::backend::cpu {
namespace {

float relu_gradient(float output, float g) {
  return portable::activation_grad_value(kernels::Activation::kRelu, 0.f, output, g);
}

// For each of `size` output rows (or columns) of the convolution: the window it falls in
// (-1 outside every window) and its tap term, windows of `window` taps starting every
// `window` from -pad.
void map_to_windows(int64_t size, int64_t window, int64_t pad, int64_t windows, int32_t tap_scale,
                    std::vector<int64_t>& which, std::vector<int32_t>& tap) {
  which.resize(size);
  tap.resize(size);
  for (int64_t i = 0; i < size; ++i) {
    const int64_t w = (i + pad) / window;
    which[i] = w < windows ? w : -1;
    tap[i] = static_cast<int32_t>((i + pad - w * window) * tap_scale);
  }
}

}  // namespace

const float* DenseOutputGrad::rows(int64_t r0, int64_t r1, float* buffer) const {
  const float* grad = dy_ + r0 * o_;
  if (y_ == nullptr) return grad;
  const float* out = y_ + r0 * o_;
  const int64_t count = (r1 - r0) * o_;
  int64_t i = 0;
  for (; i + vec8::kLanes <= count; i += vec8::kLanes) {
    vec8::store(buffer + i, vec8::relu_gradient(vec8::load<vec8::Float>(out + i),
                                                vec8::load<vec8::Float>(grad + i)));
  }
  for (; i < count; ++i) buffer[i] = relu_gradient(out[i], grad[i]);
  return buffer;
}

MaxPoolOutputGrad::MaxPoolOutputGrad(const kernels::MaxPoolInputGrad& grad, bool relu,
                                     const portable::ConvGeometry& g)
    : dy_(typed<float>(grad.dy)),
      argmax_(typed<int32_t>(grad.argmax)),
      pooled_(relu ? typed<float>(grad.pooled) : nullptr),
      ph_(grad.dy.shape()[1]),
      pw_(grad.dy.shape()[2]),
      o_(g.o),
      oh_(g.oh),
      ow_(g.ow) {
  const kernels::Pool2DParams& p = grad.params;
  map_to_windows(g.oh, p.window[0], p.pad_begin[0], ph_, static_cast<int32_t>(p.window[1]),
                 row_window_, row_tap_);
  map_to_windows(g.ow, p.window[1], p.pad_begin[1], pw_, 1, column_window_, column_tap_);
}

float MaxPoolOutputGrad::scalar_at(int64_t n, int64_t oy, int64_t ox, int64_t c) const {
  const int64_t py = row_window_[oy], px = column_window_[ox];
  if (py < 0 || px < 0) return 0.f;
  const int64_t offset = ((n * ph_ + py) * pw_ + px) * o_ + c;
  const float g = argmax_[offset] == row_tap_[oy] + column_tap_[ox] ? dy_[offset] : 0.f;
  return pooled_ == nullptr ? g : relu_gradient(pooled_[offset], g);
}

const float* MaxPoolOutputGrad::rows(int64_t r0, int64_t r1, float* buffer) const {
  const int64_t pixels = oh_ * ow_;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / pixels, oy = (r % pixels) / ow_, ox = r % ow_;
    float* out = buffer + (r - r0) * o_;
    int64_t c = 0;
    for (; c + vec8::kLanes <= o_; c += vec8::kLanes)
      vec8::store(out + c, at<Lanes<8>>(n, oy, ox, c));
    for (; c < o_; ++c) out[c] = scalar_at(n, oy, ox, c);
  }
  return buffer;
}

}  // namespace cadre::backend::cpu
