// Float32 convolutions through cuDNN's convolution API over NHWC tensors.
//
// Our filters are HWIO, [KH, KW, C, O]; cuDNN's NHWC filter layout is [O, KH, KW, C], which
// is the transpose of the filter seen as a [KH*KW*C, O] matrix. So the filter, and its
// gradient on the way back, goes through one transposing copy (a few KB to a few MB, against
// activations of hundreds of MB at the batches where cuDNN matters).
//
// cuDNN's algorithm comes from its heuristics, not from timing runs (the timing above only
// chooses between cuDNN and im2col): under kCudnn the algorithms, and so the results, are
// the same on every run with one GPU model and cuDNN version. Only
// deterministic algorithms of the GEMM kind are taken: FFT and Winograd transforms round
// differently from a product, and the atomics of the non-deterministic ones make results
// differ run to run. The math type follows float32_precision(): FMA only for float32,
// TF32 tensor cores otherwise (cuDNN has no bfloat16 compute for float32 tensors).
//
// cuDNN's padding is symmetric. TensorFlow's SAME padding puts the odd row or column at the
// end; the convolution is the same with the begin padding on both sides whenever that gives
// the same output size (every window then starts at the same place and reads only zeros
// past the input), which cuDNN is asked to confirm. Other problems, float64, and tensors
// past the 32-bit sizes of cuDNN's descriptors return false and go to im2col.
#include "core/backend/cuda/cudnn_conv.h"

#include <cudnn.h>
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "core/backend/cuda/cuda_error.h"
#include "core/backend/cuda/launch.h"
#include "core/backend/cuda/stream_timing.h"
#include "core/base/strings.h"

namespace cadre::backend::cuda {
namespace {

using kernels::Conv2DParams;

// The largest workspace an algorithm may ask for; cheaper-in-memory ones come next in
// cuDNN's ranking.
constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

struct Key {
  std::array<int, 4> x;  // n, h, w, c
  std::array<int, 3> w;  // kh, kw, o
  std::array<int, 2> y;  // oh, ow
  std::array<int, 2> pad, stride, dilation;
  cudnnMathType_t math;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    auto mix = [&h](int v) {
      h ^= std::hash<int>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (int v : k.x) mix(v);
    for (int v : k.w) mix(v);
    for (int v : k.y) mix(v);
    for (int i = 0; i < 2; ++i) {
      mix(k.pad[i]);
      mix(k.stride[i]);
      mix(k.dilation[i]);
    }
    mix(k.math);
    return h;
  }
};

// One direction's choice: the algorithm, its workspace and the convolution descriptor set
// to its math type.
struct Choice {
  int algo = -1;  // -1: no algorithm suits, use im2col
  size_t workspace = 0;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// Which way a direction of a problem runs under kAutotune.
enum class Way { kUntimed, kCudnn, kOwn };

// Descriptors and algorithms for one problem, made once and kept for the process.
struct Plan {
  bool usable = false;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  Choice forward, data, filter;
  Way forward_way = Way::kUntimed, backward_way = Way::kUntimed;
};

bool allowed_forward(int algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool allowed_data(int algo) {
  return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool allowed_filter(int algo) {
  return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
         algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

cudnnConvolutionDescriptor_t make_conv(const Key& k) {
  cudnnConvolutionDescriptor_t conv;
  check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
  check(cudnnSetConvolution2dDescriptor(conv, k.pad[0], k.pad[1], k.stride[0], k.stride[1],
                                        k.dilation[0], k.dilation[1], CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionMathType(conv, k.math), "cudnnSetConvolutionMathType");
  return conv;
}

// One direction's choice, on a convolution descriptor of its own: of cuDNN's ranked
// candidates (`rank(conv, slots, &count, results)`), the first that is allowed,
// deterministic, within the workspace bound and, for strict float32, free of tensor-core
// math; its workspace is what cuDNN says it needs (`workspace(conv, algo, &bytes)`), since
// the ranking's memory figures are estimates.
template <typename Perf, typename Rank, typename Workspace>
Choice choose(const Key& k, int slots, bool (*allowed)(int), Rank rank, Workspace workspace) {
  Choice choice;
  cudnnConvolutionDescriptor_t conv = make_conv(k);
  std::vector<Perf> ranked(static_cast<size_t>(slots));
  int count = 0;
  rank(conv, slots, &count, ranked.data());
  for (int i = 0; i < count; ++i) {
    const Perf& p = ranked[i];
    if (p.status != CUDNN_STATUS_SUCCESS || !allowed(static_cast<int>(p.algo)) ||
        p.determinism != CUDNN_DETERMINISTIC || p.memory > kMaxWorkspaceBytes) {
      continue;
    }
    bool tensor_ops =
        p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (k.math == CUDNN_FMA_MATH && tensor_ops) continue;
    check(cudnnSetConvolutionMathType(conv, k.math == CUDNN_FMA_MATH ? k.math : p.mathType),
          "cudnnSetConvolutionMathType");
    size_t bytes = 0;
    workspace(conv, p.algo, &bytes);
    choice.algo = static_cast<int>(p.algo);
    choice.workspace = std::max(p.memory, bytes);
    choice.conv = conv;
    return choice;
  }
  cudnnDestroyConvolutionDescriptor(conv);
  return choice;
}

Plan make_plan(cudnnHandle_t handle, const Key& k) {
  Plan plan;
  check(cudnnCreateTensorDescriptor(&plan.x), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&plan.y), "cudnnCreateTensorDescriptor");
  check(cudnnCreateFilterDescriptor(&plan.w), "cudnnCreateFilterDescriptor");
  check(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, k.x[0], k.x[3],
                                   k.x[1], k.x[2]),
        "cudnnSetTensor4dDescriptor");
  check(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, k.x[0], k.w[2],
                                   k.y[0], k.y[1]),
        "cudnnSetTensor4dDescriptor");
  check(cudnnSetFilter4dDescriptor(plan.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, k.w[2], k.x[3],
                                   k.w[0], k.w[1]),
        "cudnnSetFilter4dDescriptor");
  cudnnConvolutionDescriptor_t probe = make_conv(k);
  std::array<int, 4> out{};
  check(cudnnGetConvolution2dForwardOutputDim(probe, plan.x, plan.w, &out[0], &out[1], &out[2],
                                              &out[3]),
        "cudnnGetConvolution2dForwardOutputDim");
  cudnnDestroyConvolutionDescriptor(probe);
  if (out != std::array<int, 4>{k.x[0], k.w[2], k.y[0], k.y[1]}) return plan;  // padding differs

  plan.forward = choose<cudnnConvolutionFwdAlgoPerf_t>(
      k, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &allowed_forward,
      [&](auto conv, int slots, int* count, auto* results) {
        check(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x, plan.w, conv, plan.y, slots,
                                                     count, results),
              "cudnnGetConvolutionForwardAlgorithm_v7");
      },
      [&](auto conv, auto algo, size_t* bytes) {
        check(cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x, plan.w, conv, plan.y, algo,
                                                      bytes),
              "cudnnGetConvolutionForwardWorkspaceSize");
      });
  plan.data = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      k, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &allowed_data,
      [&](auto conv, int slots, int* count, auto* results) {
        check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan.w, plan.y, conv, plan.x,
                                                          slots, count, results),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      },
      [&](auto conv, auto algo, size_t* bytes) {
        check(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan.w, plan.y, conv, plan.x,
                                                           algo, bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize");
      });
  plan.filter = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      k, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &allowed_filter,
      [&](auto conv, int slots, int* count, auto* results) {
        check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan.x, plan.y, conv, plan.w,
                                                            slots, count, results),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      },
      [&](auto conv, auto algo, size_t* bytes) {
        check(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan.x, plan.y, conv, plan.w,
                                                             algo, bytes),
              "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      });
  plan.usable = true;
  return plan;
}

// A device's cuDNN handle, bound to its compute stream, and the plans made on it. Calls on
// one device queue on one stream, so they take turns under the mutex at no cost.
struct DeviceState {
  Mutex mutex;
  cudnnHandle_t handle CADRE_GUARDED_BY(mutex) = nullptr;
  std::unordered_map<Key, Plan, KeyHash> plans CADRE_GUARDED_BY(mutex);
};

DeviceState& state(int device) {
  // Never destroyed: cuDNN's handles must not be torn down after the CUDA runtime is.
  static auto* states = new DeviceState[static_cast<size_t>(visible_device_count())];
  return states[device];
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The problem's key, or false where cuDNN is not used for it.
bool key_of(const Tensor& x, const Tensor& w, const Shape& y, const Conv2DParams& p, Key& key) {
  if (x.dtype() != DType::kFloat32 || !x.is_contiguous() || !w.is_contiguous()) return false;
  if (!fits_int(x.numel()) || !fits_int(y.num_elements())) return false;
  for (int i = 0; i < 2; ++i) {
    if (!fits_int(p.pad_begin[i]) || !fits_int(p.strides[i]) || !fits_int(p.dilations[i])) {
      return false;
    }
  }
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  key.x = {i32(x.dim(0)), i32(x.dim(1)), i32(x.dim(2)), i32(x.dim(3))};
  key.w = {i32(w.dim(0)), i32(w.dim(1)), i32(w.dim(3))};
  key.y = {i32(y[1]), i32(y[2])};
  key.pad = {i32(p.pad_begin[0]), i32(p.pad_begin[1])};
  key.stride = {i32(p.strides[0]), i32(p.strides[1])};
  key.dilation = {i32(p.dilations[0]), i32(p.dilations[1])};
  key.math =
      float32_precision() == Float32Precision::kFloat32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  return true;
}

// The plan for `key` on `device`, made on first use. Returns nullptr where cuDNN takes no
// part of it. Called with the device's mutex held.
Plan* plan_for(DeviceState& s, int device, const Key& key) CADRE_REQUIRES(s.mutex) {
  if (s.handle == nullptr) {
    check(cudnnCreate(&s.handle), "cudnnCreate");
    check(cudnnSetStream(s.handle, runtime(device).compute()), "cudnnSetStream");
  }
  auto it = s.plans.find(key);
  if (it == s.plans.end()) it = s.plans.emplace(key, make_plan(s.handle, key)).first;
  return it->second.usable ? &it->second : nullptr;
}

// w [KH, KW, C, O] as the contiguous [O, KH, KW, C] that cuDNN reads.
Tensor to_cudnn_filter(const Tensor& w) {
  int64_t taps = w.dim(0) * w.dim(1) * w.dim(2), o = w.dim(3);
  Strides strides{};
  strides[0] = 1;
  strides[1] = o;
  Tensor transposed = Tensor::view_of(w.buffer(), Shape{o, taps}, strides, w.offset(), w.dtype());
  Tensor out = Tensor::empty(Shape{o, taps}, w.dtype(), w.device());
  kernels::copy.get(w.device())(transposed, out);
  return out;
}

// The [O, KH, KW, C] gradient `from` written into dw [KH, KW, C, O].
void from_cudnn_filter(const Tensor& from, Tensor& dw) {
  int64_t taps = dw.dim(0) * dw.dim(1) * dw.dim(2), o = dw.dim(3);
  Strides strides{};
  strides[0] = 1;
  strides[1] = o;
  Tensor target = Tensor::view_of(dw.buffer(), Shape{o, taps}, strides, dw.offset(), dw.dtype());
  kernels::copy.get(dw.device())(from, target);
}

Tensor workspace(size_t bytes, Device device) {
  if (bytes == 0) return Tensor();
  return Tensor::empty(Shape{static_cast<int64_t>(bytes)}, DType::kUInt8, device);
}

void* data_of(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// Whether this call runs through cuDNN: always under kCudnn; under kAutotune, as the first
// call of the problem's direction timed it. A path that runs out of memory loses, so that
// autotuning fails no convolution that one of the paths can run; where both do, the
// caller's own path runs and reports it.
bool cudnn_runs(Way& way, const Key& key, const char* direction, cudaStream_t stream,
                const std::function<void()>& cudnn, const std::function<void()>& own) {
  if (gpu_convolution() == GpuConvolution::kCudnn) return true;
  if (way == Way::kUntimed) {
    std::optional<float> cudnn_ms = time_if_it_fits(stream, cudnn);
    std::optional<float> own_ms = time_if_it_fits(stream, own);
    way = cudnn_ms && (!own_ms || *cudnn_ms <= *own_ms) ? Way::kCudnn : Way::kOwn;
    VLOG(1) << "conv2d " << direction << " x [" << key.x[0] << ", " << key.x[1] << ", " << key.x[2]
            << ", " << key.x[3] << "] w [" << key.w[0] << ", " << key.w[1] << ", " << key.x[3]
            << ", " << key.w[2] << "]: cuDNN " << milliseconds(cudnn_ms) << ", im2col "
            << milliseconds(own_ms);
  }
  return way == Way::kCudnn;
}

}  // namespace

bool cudnn_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                  const Conv2DParams& p, const std::function<void()>& own) {
  Key key;
  if (gpu_convolution() == GpuConvolution::kIm2col || !y.is_contiguous() ||
      !key_of(x, w, y.shape(), p, key)) {
    return false;
  }
  DeviceGuard guard(y.device());
  DeviceState& s = state(y.device().index);
  MutexLock lock(s.mutex);
  Plan* plan = plan_for(s, y.device().index, key);
  if (plan == nullptr || plan->forward.algo < 0) return false;
  cudnnHandle_t handle = s.handle;  // read under the lock, which the lambda runs under too
  auto cudnn = [&] {
    Tensor filter = to_cudnn_filter(w);
    Tensor scratch = workspace(plan->forward.workspace, y.device());
    const float one = 1.0f, zero = 0.0f;
    check(cudnnConvolutionForward(
              handle, &one, plan->x, x.raw_data(), plan->w, filter.raw_data(), plan->forward.conv,
              static_cast<cudnnConvolutionFwdAlgo_t>(plan->forward.algo), data_of(scratch),
              plan->forward.workspace, &zero, plan->y, y.raw_data()),
          "cudnnConvolutionForward");
    if (bias.defined() || p.activation != kernels::Activation::kNone) {
      bias_activation_epilogue(y, bias, p.activation, 0.0);
    }
  };
  if (!cudnn_runs(plan->forward_way, key, "forward", stream_of(y.device()), cudnn, own)) {
    return false;
  }
  cudnn();
  return true;
}

bool cudnn_conv2d_grad(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                       const Conv2DParams& p, const std::function<void()>& own) {
  Key key;
  if (gpu_convolution() == GpuConvolution::kIm2col || !dy.is_contiguous() ||
      (dx.defined() && !dx.is_contiguous()) || (dw.defined() && !dw.is_contiguous()) ||
      !key_of(x, w, dy.shape(), p, key)) {
    return false;
  }
  DeviceGuard guard(dy.device());
  DeviceState& s = state(dy.device().index);
  MutexLock lock(s.mutex);
  Plan* plan = plan_for(s, dy.device().index, key);
  if (plan == nullptr || (dx.defined() && plan->data.algo < 0) ||
      (dw.defined() && plan->filter.algo < 0)) {
    return false;
  }
  cudnnHandle_t handle = s.handle;  // read under the lock, which the lambda runs under too
  auto cudnn = [&] {
    const float one = 1.0f, zero = 0.0f;
    if (dx.defined()) {
      Tensor filter = to_cudnn_filter(w);
      Tensor scratch = workspace(plan->data.workspace, dy.device());
      check(cudnnConvolutionBackwardData(
                handle, &one, plan->w, filter.raw_data(), plan->y, dy.raw_data(), plan->data.conv,
                static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->data.algo), data_of(scratch),
                plan->data.workspace, &zero, plan->x, dx.raw_data()),
            "cudnnConvolutionBackwardData");
    }
    if (dw.defined()) {
      Tensor grad =
          Tensor::empty(Shape{w.dim(3), w.dim(0) * w.dim(1) * w.dim(2)}, w.dtype(), w.device());
      Tensor scratch = workspace(plan->filter.workspace, dy.device());
      check(cudnnConvolutionBackwardFilter(
                handle, &one, plan->x, x.raw_data(), plan->y, dy.raw_data(), plan->filter.conv,
                static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->filter.algo), data_of(scratch),
                plan->filter.workspace, &zero, plan->w, grad.raw_data()),
            "cudnnConvolutionBackwardFilter");
      from_cudnn_filter(grad, dw);
    }
  };
  if (!cudnn_runs(plan->backward_way, key, "backward", stream_of(dy.device()), cudnn, own)) {
    return false;
  }
  cudnn();
  return true;
}

}  // namespace cadre::backend::cuda
