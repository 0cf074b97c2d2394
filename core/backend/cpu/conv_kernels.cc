// CPU 2-D convolution (NHWC input, [KH, KW, in, out] filters): float32 forward through
// oneDNN's convolution primitive (with fused bias and ReLU; one input channel through
// conv_one_channel.h); float32 gradients through
// matrix products (conv_gemm.h) when there are enough channels, else through oneDNN's
// backward primitives (the filter gradient of one input channel through conv_one_channel.h);
// float64 through direct loops (conv_direct.h, used by gradient checks). A gradient that comes from
// a max pooling over the output is read in the pooling's form where products or the one-channel
// filter gradient take it (conv_output_grad.h).
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cadre/runtime/threading.h"
#include "core/backend/cpu/conv_direct.h"
#include "core/backend/cpu/conv_gemm.h"
#include "core/backend/cpu/conv_one_channel.h"
#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/onednn.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Activation;
using kernels::Conv2DParams;
using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

using Geometry = portable::ConvGeometry;

Geometry geometry(const Tensor& x, const Tensor& w, const Shape& y, const Conv2DParams& p) {
  return portable::conv_geometry(x.shape(), w.shape(), y, p);
}

struct Key {
  Geometry g;
  Conv2DParams p;
  bool bias;
  int threads;
  bool operator==(const Key& other) const {
    return std::memcmp(&g, &other.g, sizeof g) == 0 && p.strides == other.p.strides &&
           p.dilations == other.p.dilations && p.pad_begin == other.p.pad_begin &&
           p.pad_end == other.p.pad_end && p.activation == other.p.activation &&
           bias == other.bias && threads == other.threads;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) {
      h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (int64_t v : {k.g.n, k.g.h, k.g.w, k.g.c, k.g.kh, k.g.kw, k.g.o, k.g.oh, k.g.ow}) mix(v);
    for (int i = 0; i < 2; ++i) {
      mix(k.p.strides[i]);
      mix(k.p.dilations[i]);
      mix(k.p.pad_begin[i]);
      mix(k.p.pad_end[i]);
    }
    mix(static_cast<int64_t>(k.p.activation));
    mix(k.bias);
    mix(k.threads);
    return h;
  }
};

// One convolution's primitives: forward, and (built on first use) the two backward ones,
// with the reorders between our filter layout (hwio) and the ones oneDNN chose.
struct Conv {
  dnnl::memory::desc src, dst, bias, user_weights;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  std::optional<dnnl::reorder> fwd_weights_reorder;

  bool has_backward = false;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  std::optional<dnnl::reorder> bwd_data_weights_reorder;
  dnnl::convolution_backward_weights bwd_weights;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  std::optional<dnnl::reorder> bwd_weights_reorder;  // chosen diff-weights layout -> hwio
};

dnnl::memory::dims strides_of(const Conv2DParams& p) { return {p.strides[0], p.strides[1]}; }
dnnl::memory::dims dilates_of(const Conv2DParams& p) {
  return {p.dilations[0] - 1, p.dilations[1] - 1};  // oneDNN counts extra gaps
}
dnnl::memory::dims pad_l(const Conv2DParams& p) { return {p.pad_begin[0], p.pad_begin[1]}; }
dnnl::memory::dims pad_r(const Conv2DParams& p) { return {p.pad_end[0], p.pad_end[1]}; }

std::optional<dnnl::reorder> reorder_if_needed(const dnnl::memory::desc& from,
                                               const dnnl::memory::desc& to) {
  if (from == to) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(onednn::engine(), from, onednn::engine(), to,
                                                     onednn::attributes()));
}

Conv& conv_for(const Key& key) {
  thread_local std::unordered_map<Key, Conv, KeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const Geometry& g = key.g;
  auto f32 = dnnl::memory::data_type::f32;
  Conv conv;
  try {
    conv.src = dnnl::memory::desc(dims{g.n, g.c, g.h, g.w}, f32, tag::nhwc);
    conv.dst = dnnl::memory::desc(dims{g.n, g.o, g.oh, g.ow}, f32, tag::nhwc);
    conv.user_weights = dnnl::memory::desc(dims{g.o, g.c, g.kh, g.kw}, f32, tag::hwio);
    dnnl::memory::desc any_weights(dims{g.o, g.c, g.kh, g.kw}, f32, tag::any);
    if (key.bias) conv.bias = dnnl::memory::desc(dims{g.o}, f32, tag::x);
    dnnl::post_ops ops;
    if (key.p.activation == Activation::kRelu) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    }
    auto desc =
        key.bias ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                       conv.src, any_weights, conv.bias, conv.dst, strides_of(key.p),
                       dilates_of(key.p), pad_l(key.p), pad_r(key.p))
                 : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                   dnnl::algorithm::convolution_direct, conv.src,
                                                   any_weights, conv.dst, strides_of(key.p),
                                                   dilates_of(key.p), pad_l(key.p), pad_r(key.p));
    conv.fwd_pd =
        dnnl::convolution_forward::primitive_desc(desc, onednn::attributes(ops), onednn::engine());
    conv.fwd = dnnl::convolution_forward(conv.fwd_pd);
    conv.fwd_weights_reorder = reorder_if_needed(conv.user_weights, conv.fwd_pd.weights_desc());
  } catch (const dnnl::error& e) {
    onednn::rethrow(e, "conv2d (creating the forward primitive)");
  }
  return cache.emplace(key, std::move(conv)).first->second;
}

void build_backward(const Key& key, Conv& conv) {
  if (conv.has_backward) return;
  const Geometry& g = key.g;
  auto f32 = dnnl::memory::data_type::f32;
  try {
    dnnl::memory::desc any_weights(dims{g.o, g.c, g.kh, g.kw}, f32, tag::any);
    auto data_desc = dnnl::convolution_backward_data::desc(
        dnnl::algorithm::convolution_direct, conv.src, any_weights, conv.dst, strides_of(key.p),
        dilates_of(key.p), pad_l(key.p), pad_r(key.p));
    conv.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
        data_desc, onednn::attributes(), onednn::engine(), conv.fwd_pd);
    conv.bwd_data = dnnl::convolution_backward_data(conv.bwd_data_pd);
    conv.bwd_data_weights_reorder =
        reorder_if_needed(conv.user_weights, conv.bwd_data_pd.weights_desc());
    dnnl::memory::desc bias(dims{g.o}, f32, tag::x);
    auto weights_desc = dnnl::convolution_backward_weights::desc(
        dnnl::algorithm::convolution_direct, conv.src, any_weights, bias, conv.dst,
        strides_of(key.p), dilates_of(key.p), pad_l(key.p), pad_r(key.p));
    conv.bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
        weights_desc, onednn::attributes(), onednn::engine(), conv.fwd_pd);
    conv.bwd_weights = dnnl::convolution_backward_weights(conv.bwd_weights_pd);
    conv.bwd_weights_reorder =
        reorder_if_needed(conv.bwd_weights_pd.diff_weights_desc(), conv.user_weights);
  } catch (const dnnl::error& e) {
    onednn::rethrow(e, "conv2d (creating the backward primitives)");
  }
  conv.has_backward = true;
}

// `weights` in oneDNN's chosen layout `md`: reordered from hwio when they differ.
Tensor weights_in(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& user,
                  const dnnl::memory::desc& md, const Tensor& w) {
  if (!reorder) return w;
  Tensor out = Tensor::empty(Shape{static_cast<int64_t>(md.get_size() / sizeof(float))},
                             DType::kFloat32, Device::cpu(0));
  onednn::execute(*reorder,
                  {{DNNL_ARG_FROM, onednn::wrap(user, w)}, {DNNL_ARG_TO, onednn::wrap(md, out)}},
                  dnnl::memory::desc(), "conv2d (filter reorder)");
  return out;
}

Key key_of(const Geometry& g, const Conv2DParams& p, bool bias) {
  return Key{g, p, bias, current_thread_budget()};
}

void conv2d_f32(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                const Conv2DParams& p) {
  const Geometry g = geometry(x, w, y.shape(), p);
  if (conv_one_channel::in_registers_suits(g)) {
    return conv_one_channel::forward(x, w, bias, p.activation, y, g);
  }
  Key key = key_of(g, p, bias.defined());
  Conv& conv = conv_for(key);
  auto wmd = conv.fwd_pd.weights_desc();
  Tensor weights = weights_in(conv.fwd_weights_reorder, conv.user_weights, wmd, w);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, onednn::wrap(conv.src, x)},
      {DNNL_ARG_WEIGHTS, onednn::wrap(wmd, weights)},
      {DNNL_ARG_DST, onednn::wrap(conv.dst, y)},
  };
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, onednn::wrap(conv.bias, bias));
  onednn::execute(conv.fwd, std::move(args), conv.fwd_pd.scratchpad_desc(), "conv2d");
}

// dy with the gradient of activation `act` (whose output is y) applied.
Tensor through_activation(Activation act, const Tensor& y, const Tensor& dy) {
  if (act == Activation::kNone) return dy;
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  kernels::activation_grad.call(dy.device(), act, 0, y, dy, dz);
  return dz;
}

void conv2d_grad_f32(const Tensor& x, const Tensor& w, const Tensor& dy_out, const Tensor& y,
                     Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& forward) {
  const Geometry g = geometry(x, w, dy_out.shape(), forward);
  if (conv_gemm::suits(g)) {
    return conv_gemm::backward(x, w, dy_out, y, forward.activation, dx, dw, db, g);
  }
  const bool own_filter_grad = conv_one_channel::suits(g);
  if (own_filter_grad && (dw.defined() || db.defined())) {
    conv_one_channel::filter_grad(x, dy_out, y, forward.activation, dw, db, g);
  }
  if (own_filter_grad && !dx.defined()) return;
  // Backward primitives hang off a forward one of the same geometry; one without bias or
  // activation serves every variant (the activation's gradient is applied first).
  Conv2DParams p = forward;
  p.activation = Activation::kNone;
  Key key = key_of(g, p, /*bias=*/false);
  const Tensor dy = through_activation(forward.activation, y, dy_out);
  Conv& conv = conv_for(key);
  build_backward(key, conv);
  if (dx.defined()) {
    auto wmd = conv.bwd_data_pd.weights_desc();
    Tensor weights = weights_in(conv.bwd_data_weights_reorder, conv.user_weights, wmd, w);
    onednn::execute(conv.bwd_data,
                    {{DNNL_ARG_DIFF_DST, onednn::wrap(conv.dst, dy)},
                     {DNNL_ARG_WEIGHTS, onednn::wrap(wmd, weights)},
                     {DNNL_ARG_DIFF_SRC, onednn::wrap(conv.src, dx)}},
                    conv.bwd_data_pd.scratchpad_desc(), "conv2d backward (data)");
  }
  if (!own_filter_grad && (dw.defined() || db.defined())) {
    auto dwmd = conv.bwd_weights_pd.diff_weights_desc();
    Tensor raw_dw =
        conv.bwd_weights_reorder || !dw.defined()
            ? Tensor::empty(Shape{static_cast<int64_t>(dwmd.get_size() / sizeof(float))},
                            DType::kFloat32, Device::cpu(0))
            : dw;
    Tensor raw_db =
        db.defined() ? db : Tensor::empty(Shape{key.g.o}, DType::kFloat32, Device::cpu(0));
    onednn::execute(
        conv.bwd_weights,
        {{DNNL_ARG_SRC, onednn::wrap(conv.src, x)},
         {DNNL_ARG_DIFF_DST, onednn::wrap(conv.dst, dy)},
         {DNNL_ARG_DIFF_WEIGHTS, onednn::wrap(dwmd, raw_dw)},
         {DNNL_ARG_DIFF_BIAS, onednn::wrap(conv.bwd_weights_pd.diff_bias_desc(), raw_db)}},
        conv.bwd_weights_pd.scratchpad_desc(), "conv2d backward (filters)");
    if (dw.defined() && conv.bwd_weights_reorder) {
      onednn::execute(*conv.bwd_weights_reorder,
                      {{DNNL_ARG_FROM, onednn::wrap(dwmd, raw_dw)},
                       {DNNL_ARG_TO, onednn::wrap(conv.user_weights, dw)}},
                      dnnl::memory::desc(), "conv2d (filter-gradient reorder)");
    }
  }
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
            const Conv2DParams& p) {
  if (x.dtype() == DType::kFloat32) return conv2d_f32(x, w, bias, y, p);
  if (x.dtype() == DType::kFloat64) return conv2d_f64(x, w, bias, y, p);
  throw_unsupported_dtype("conv2d", x.dtype(), "float32, float64");
}

void conv2d_grad(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y, Tensor& dx,
                 Tensor& dw, Tensor& db, const Conv2DParams& p) {
  if (x.dtype() == DType::kFloat32) return conv2d_grad_f32(x, w, dy, y, dx, dw, db, p);
  if (x.dtype() == DType::kFloat64) {
    return conv2d_grad_f64(x, w, through_activation(p.activation, y, dy), dx, dw, db, p);
  }
  throw_unsupported_dtype("conv2d", x.dtype(), "float32, float64");
}

// Float32 through products or the one-channel filter gradient, read straight from the
// pooling's form; elsewhere the caller builds the dense gradient.
bool conv2d_grad_from_max_pool(const Tensor& x, const Tensor& w,
                               const kernels::MaxPoolInputGrad& grad, Tensor& dx, Tensor& dw,
                               Tensor& db, const Conv2DParams& p) {
  if (x.dtype() != DType::kFloat32 || !grad.tiles()) return false;
  const Geometry g = geometry(x, w, grad.input_shape, p);
  if (conv_gemm::suits(g)) {
    conv_gemm::backward(x, w, grad, p.activation, dx, dw, db, g);
    return true;
  }
  if (dx.defined() || !conv_one_channel::in_registers_suits(g)) return false;
  conv_one_channel::filter_grad(x, grad, p.activation, dw, db, g);
  return true;
}

// Float32 with one input channel, where its own forward loop runs (conv_one_channel.h).
bool conv2d_max_pool_suits(const Tensor& x, const Tensor& w, const Conv2DParams& p) {
  if (x.dtype() != DType::kFloat32 || x.rank() != 4 || w.rank() != 4) return false;
  Geometry g = geometry(x, w, Shape{x.shape()[0], 1, 1, w.shape()[3]}, p);
  return conv_one_channel::in_registers_suits(g);
}

bool conv2d_max_pool(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2DParams& p,
                     const Shape& conv_output, const kernels::Pool2DParams& pool, Tensor& y,
                     Tensor& argmax) {
  if (x.dtype() != DType::kFloat32) return false;
  const Geometry g = geometry(x, w, conv_output, p);
  if (!conv_one_channel::forward_max_pool_suits(g, pool)) return false;
  conv_one_channel::forward_max_pool(x, w, bias, p.activation, pool, y, argmax, g);
  return true;
}

}  // namespace

void register_conv_kernels() {
  kernels::conv2d.set(DeviceType::kCPU, &conv2d);
  kernels::conv2d_grad.set(DeviceType::kCPU, &conv2d_grad);
  kernels::conv2d_grad_from_max_pool.set(DeviceType::kCPU, &conv2d_grad_from_max_pool);
  kernels::conv2d_max_pool_suits.set(DeviceType::kCPU, &conv2d_max_pool_suits);
  kernels::conv2d_max_pool.set(DeviceType::kCPU, &conv2d_max_pool);
}

}  // namespace cadre::backend::cpu
