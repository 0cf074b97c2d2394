// CPU matrix products: float32 through oneDNN's matmul primitive (AVX-512/AVX2 kernels chosen
// by oneDNN, bias and activation fused as post-ops), float64 through OpenBLAS.
#include <cblas.h>

#include <cmath>
#include <functional>
#include <tuple>
#include <unordered_map>

#include "cadre/runtime/threading.h"
#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/cpu/onednn.h"
#include "core/kernels/linalg.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Activation;
using kernels::MatmulParams;

struct Key {
  int64_t batch, m, k, n;
  int64_t lda, ldb;  // the stored rows' stride of a 2-D a and b (views::is_row_strided_matrix)
  bool ta, tb, shared_b, bias, accumulate;
  Activation act;
  float alpha;
  int threads;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<int64_t>()(k.batch);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::hash<int64_t>()(k.m));
    mix(std::hash<int64_t>()(k.k));
    mix(std::hash<int64_t>()(k.n));
    mix(std::hash<int64_t>()(k.lda));
    mix(std::hash<int64_t>()(k.ldb));
    mix((k.ta << 0) | (k.tb << 1) | (k.shared_b << 2) | (k.bias << 3) | (k.accumulate << 4));
    mix(static_cast<size_t>(k.act));
    mix(std::hash<float>()(k.alpha));
    mix(static_cast<size_t>(k.threads));
    return h;
  }
};

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, bias, c, scratchpad;
};

dnnl::memory::desc matrix_desc(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                               bool batched, int64_t ld = 0) {
  // Logical [rows, cols]; stored [cols, rows] when transposed, its stored rows `ld` apart
  // (0: packed).
  using dims = dnnl::memory::dims;
  auto f32 = dnnl::memory::data_type::f32;
  if (!batched) {
    if (ld == 0) ld = transposed ? rows : cols;
    return dnnl::memory::desc(dims{rows, cols}, f32, transposed ? dims{1, ld} : dims{ld, 1});
  }
  return dnnl::memory::desc(dims{batch, rows, cols}, f32,
                            transposed ? dims{rows * cols, 1, rows} : dims{rows * cols, cols, 1});
}

const Prepared& prepare(const Key& key) {
  thread_local std::unordered_map<Key, Prepared, KeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  bool batched = key.batch > 1;  // a batch of one is laid out as a plain matrix
  Prepared p;
  p.a = matrix_desc(key.batch, key.m, key.k, key.ta, batched, key.lda);
  p.b = matrix_desc(key.shared_b ? 1 : key.batch, key.k, key.n, key.tb, batched, key.ldb);
  p.c = matrix_desc(key.batch, key.m, key.n, false, batched);
  using dims = dnnl::memory::dims;
  if (key.bias) {
    p.bias = batched
                 ? dnnl::memory::desc(dims{1, 1, key.n}, dnnl::memory::data_type::f32,
                                      dims{key.n, key.n, 1})
                 : dnnl::memory::desc(dims{1, key.n}, dnnl::memory::data_type::f32, dims{key.n, 1});
  }
  dnnl::post_ops ops;
  if (key.accumulate) ops.append_sum(1.0f);
  dnnl::algorithm algorithm;
  float eltwise_alpha;
  if (onednn::eltwise_for(key.act, key.alpha, algorithm, eltwise_alpha)) {
    ops.append_eltwise(1.0f, algorithm, eltwise_alpha, 0.f);
  }
  try {
    auto desc =
        key.bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
    dnnl::matmul::primitive_desc pd(desc, onednn::attributes(ops), onednn::engine());
    p.primitive = dnnl::matmul(pd);
    p.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error& e) {
    onednn::rethrow(e, "matmul (creating the primitive)");
  }
  return cache.emplace(key, std::move(p)).first->second;
}

void matmul_f32(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                const MatmulParams& params) {
  int64_t batch = a.rank() == 3 ? a.shape()[0] : 1;
  int ra = a.rank(), rb = b.rank();
  int64_t m = params.transpose_a ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t k = params.transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  int64_t n = params.transpose_b ? b.shape()[rb - 2] : b.shape()[rb - 1];
  Key key{batch,
          m,
          k,
          n,
          ra == 2 ? a.strides()[0] : 0,
          rb == 2 ? b.strides()[0] : 0,
          params.transpose_a,
          params.transpose_b,
          rb == 2,
          bias.defined(),
          params.accumulate,
          params.activation,
          static_cast<float>(params.alpha),
          current_thread_budget()};
  const Prepared& p = prepare(key);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, onednn::wrap(p.a, a)},
      {DNNL_ARG_WEIGHTS, onednn::wrap(p.b, b)},
      {DNNL_ARG_DST, onednn::wrap(p.c, out)},
  };
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, onednn::wrap(p.bias, bias));
  onednn::execute(p.primitive, std::move(args), p.scratchpad, "matmul");
}

double apply(Activation act, double alpha, double z) {
  switch (act) {
    case Activation::kNone:
      return z;
    case Activation::kRelu:
      return z > 0 ? z : 0;
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-z));
    case Activation::kTanh:
      return std::tanh(z);
    case Activation::kElu:
      return z > 0 ? z : alpha * std::expm1(z);
    default:
      return z;  // the op layer applies the others separately
  }
}

void matmul_f64(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                const MatmulParams& params) {
  bool batched = a.rank() == 3;
  int64_t batch = batched ? a.shape()[0] : 1;
  int ra = a.rank(), rb = b.rank();
  int64_t m = params.transpose_a ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t k = params.transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  int64_t n = params.transpose_b ? b.shape()[rb - 2] : b.shape()[rb - 1];
  const double* pa = typed<double>(a);
  const double* pb = typed<double>(b);
  double* pc = typed_mut<double>(out);
  bool shared_b = rb == 2;
  // A 2-D operand's stored rows may lie further apart than their length.
  const int64_t lda = ra == 2 ? a.strides()[0] : (params.transpose_a ? m : k);
  const int64_t ldb = rb == 2 ? b.strides()[0] : (params.transpose_b ? k : n);
  for (int64_t i = 0; i < batch; ++i) {
    cblas_dgemm(CblasRowMajor, params.transpose_a ? CblasTrans : CblasNoTrans,
                params.transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0, pa + i * m * k,
                static_cast<int>(lda), pb + (shared_b ? 0 : i * k * n), static_cast<int>(ldb),
                params.accumulate ? 1.0 : 0.0, pc + i * m * n, static_cast<int>(n));
  }
  if (bias.defined() || params.activation != Activation::kNone) {
    const double* pbias = bias.defined() ? typed<double>(bias) : nullptr;
    int64_t rows = batch * m;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double z = pc[r * n + c] + (pbias != nullptr ? pbias[c] : 0.0);
        pc[r * n + c] = apply(params.activation, params.alpha, z);
      }
    }
  }
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const MatmulParams& params) {
  if (a.dtype() == DType::kFloat32) return matmul_f32(a, b, bias, out, params);
  if (a.dtype() == DType::kFloat64) return matmul_f64(a, b, bias, out, params);
  throw_unsupported_dtype("matmul", a.dtype(), "float32, float64");
}

}  // namespace

void register_matmul_kernels() { kernels::matmul.set(DeviceType::kCPU, &matmul); }

}  // namespace cadre::backend::cpu
