// CUDA matrix products. Row-major operands are passed to the column-major libraries as
// their transposes: C[m, n] = op(A) op(B) is computed as C^T = op(B)^T op(A)^T.
//
// A dense layer's product (2-D, float32, no accumulation) goes through cuBLASLt with the
// bias and ReLU fused into its epilogue, one kernel for act(x·w + b). Everything else
// (batches, float64, accumulation, sigmoid/tanh/elu, or no cuBLASLt algorithm for the
// shape) goes through cublasGemmStridedBatchedEx, followed by an epilogue kernel when
// there is a bias or an activation. The float32 compute type follows
// float32_precision(): IEEE float32, TF32 or bfloat16 tensor-core products.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cadre/base/mutex.h"
#include "cadre/runtime/precision.h"
#include "core/backend/cuda/cuda_error.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/cuda/launch.h"
#include "core/kernels/linalg.h"

namespace cadre::backend::cuda {
namespace {

using kernels::Activation;
using kernels::MatmulParams;

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

cublasComputeType_t float32_compute_type() {
  switch (float32_precision()) {
    case Float32Precision::kTF32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Float32Precision::kBFloat16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    default:
      return CUBLAS_COMPUTE_32F;
  }
}

// The largest power of two (up to 256) dividing the address.
uint32_t alignment_of(const void* p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

struct Dims {
  int64_t batch, m, k, n;
};

Dims dims_of(const Tensor& a, const Tensor& b, const MatmulParams& p) {
  int ra = a.rank(), rb = b.rank();
  return {ra == 3 ? a.shape()[0] : 1, p.transpose_a ? a.shape()[ra - 1] : a.shape()[ra - 2],
          p.transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1],
          p.transpose_b ? b.shape()[rb - 2] : b.shape()[rb - 1]};
}

// --- cuBLASLt with a fused epilogue ---

struct LtKey {
  int64_t m, k, n;
  bool ta, tb, bias, relu;
  cublasComputeType_t compute;
  uint32_t align_a, align_b, align_c, align_bias;
  bool operator==(const LtKey& o) const {
    return m == o.m && k == o.k && n == o.n && ta == o.ta && tb == o.tb && bias == o.bias &&
           relu == o.relu && compute == o.compute && align_a == o.align_a && align_b == o.align_b &&
           align_c == o.align_c && align_bias == o.align_bias;
  }
};
struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = std::hash<int64_t>()(k.m);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::hash<int64_t>()(k.k));
    mix(std::hash<int64_t>()(k.n));
    mix((k.ta << 0) | (k.tb << 1) | (k.bias << 2) | (k.relu << 3));
    mix(static_cast<size_t>(k.compute));
    mix((size_t{k.align_a} << 24) ^ (size_t{k.align_b} << 16) ^ (size_t{k.align_c} << 8) ^
        k.align_bias);
    return h;
  }
};

struct LtPlan {
  bool usable = false;  // false: no algorithm for this problem, use the cuBLAS path
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

// A cuBLAS and a cuBLASLt handle bound to a device's compute stream, with the cuBLASLt
// plans made on them. A call leases one from its device's pool and gives it back: a handle
// is used by one thread at a time (its math mode and plans' bias pointers change per
// call), and threads that come and go leave no handles behind.
struct Handles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::unordered_map<LtKey, LtPlan, LtKeyHash> plans;
};

class HandlePool {
 public:
  std::unique_ptr<Handles> acquire(int device) {
    {
      MutexLock lock(mutex_);
      auto& free = free_[device];
      if (!free.empty()) {
        std::unique_ptr<Handles> h = std::move(free.back());
        free.pop_back();
        return h;
      }
    }
    auto h = std::make_unique<Handles>();
    check(cublasCreate(&h->blas), "cublasCreate");
    check(cublasSetStream(h->blas, runtime(device).compute()), "cublasSetStream");
    check(cublasLtCreate(&h->lt), "cublasLtCreate");
    return h;
  }
  void release(int device, std::unique_ptr<Handles> h) {
    MutexLock lock(mutex_);
    free_[device].push_back(std::move(h));
  }

 private:
  Mutex mutex_;
  std::unordered_map<int, std::vector<std::unique_ptr<Handles>>> free_ CADRE_GUARDED_BY(mutex_);
};

HandlePool& handle_pool() {
  static auto* pool = new HandlePool;  // never destroyed: handles outlive static tensors
  return *pool;
}

class Lease {
 public:
  explicit Lease(int device) : device_(device), handles_(handle_pool().acquire(device)) {}
  ~Lease() { handle_pool().release(device_, std::move(handles_)); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Handles& operator*() { return *handles_; }
  Handles* operator->() { return handles_.get(); }

 private:
  int device_;
  std::unique_ptr<Handles> handles_;
};

// The plan for a key, built once per handle (descriptors are cheap but the heuristic query
// is not).
const LtPlan& lt_plan(Handles& h, const LtKey& key) {
  cublasLtHandle_t lt = h.lt;
  auto& plans = h.plans;
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  LtPlan plan;
  check(cublasLtMatmulDescCreate(&plan.desc, key.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Library operand "A" is our b, "B" is our a (see the file comment).
  cublasOperation_t op_a = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "cublasLtMatmulDescSetAttribute (TRANSA)");
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "cublasLtMatmulDescSetAttribute (TRANSB)");
  cublasLtEpilogue_t epilogue =
      key.bias ? (key.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
               : (key.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                       sizeof epilogue),
        "cublasLtMatmulDescSetAttribute (EPILOGUE)");
  // Stored shapes, column-major: our b is [n, k] (tb) or [k, n], seen transposed.
  check(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_32F, key.tb ? key.k : key.n,
                                   key.tb ? key.n : key.k, key.tb ? key.k : key.n),
        "cublasLtMatrixLayoutCreate (A)");
  check(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_32F, key.ta ? key.m : key.k,
                                   key.ta ? key.k : key.m, key.ta ? key.m : key.k),
        "cublasLtMatrixLayoutCreate (B)");
  check(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, key.n, key.m, key.n),
        "cublasLtMatrixLayoutCreate (C)");
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  size_t workspace = kLtWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof workspace),
        "cublasLtMatmulPreferenceSetAttribute");
  // Library A is our b, B our a, C and D our out.
  uint32_t aligns[4] = {key.align_b, key.align_a, key.align_c, key.align_c};
  cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    check(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof aligns[i]),
          "cublasLtMatmulPreferenceSetAttribute");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, plan.desc, plan.a, plan.b, plan.c,
                                                         plan.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // A bias pointer less aligned than a float4 is left to the cuBLAS path.
  if (status == CUBLAS_STATUS_SUCCESS && found > 0 && (!key.bias || key.align_bias >= 16)) {
    plan.usable = true;
    plan.algo = result.algo;
    plan.workspace = result.workspaceSize;
  }
  return plans.emplace(key, plan).first->second;
}

// Returns false when cuBLASLt has no algorithm for the problem.
bool matmul_lt(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
               const MatmulParams& p, const Dims& d) {
  Lease h(out.device().index);
  LtKey key{d.m,
            d.k,
            d.n,
            p.transpose_a,
            p.transpose_b,
            bias.defined(),
            p.activation == Activation::kRelu,
            float32_compute_type(),
            alignment_of(a.raw_data()),
            alignment_of(b.raw_data()),
            alignment_of(out.raw_data()),
            bias.defined() ? alignment_of(bias.raw_data()) : 256u};
  const LtPlan& plan = lt_plan(*h, key);
  if (!plan.usable) return false;
  if (bias.defined()) {
    const void* bias_ptr = bias.raw_data();
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                         sizeof bias_ptr),
          "cublasLtMatmulDescSetAttribute (BIAS_POINTER)");
  }
  Tensor workspace;
  if (plan.workspace > 0) {
    workspace =
        Tensor::empty(Shape{static_cast<int64_t>(plan.workspace)}, DType::kUInt8, out.device());
  }
  float one = 1.f, zero = 0.f;
  check(cublasLtMatmul(h->lt, plan.desc, &one, b.raw_data(), plan.a, a.raw_data(), plan.b, &zero,
                       out.raw_data(), plan.c, out.raw_data(), plan.c, &plan.algo,
                       workspace.defined() ? workspace.raw_data() : nullptr, plan.workspace,
                       stream_of(out.device())),
        "cublasLtMatmul");
  return true;
}

// --- cuBLAS for everything else ---

void matmul_blas(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                 const MatmulParams& p, const Dims& d) {
  Lease lease(out.device().index);
  cublasHandle_t handle = lease->blas;
  bool f32 = a.dtype() == DType::kFloat32;
  cudaDataType type = f32 ? CUDA_R_32F : CUDA_R_64F;
  cublasComputeType_t compute = f32 ? float32_compute_type() : CUBLAS_COMPUTE_64F;
  int lda = static_cast<int>(p.transpose_a ? d.m : d.k);
  int ldb = static_cast<int>(p.transpose_b ? d.k : d.n);
  long long stride_a = d.m * d.k, stride_b = b.rank() == 2 ? 0 : d.k * d.n, stride_c = d.m * d.n;
  float one_f = 1.f, beta_f = p.accumulate ? 1.f : 0.f;
  double one_d = 1.0, beta_d = p.accumulate ? 1.0 : 0.0;
  const void* alpha = f32 ? static_cast<const void*>(&one_f) : &one_d;
  const void* beta = f32 ? static_cast<const void*>(&beta_f) : &beta_d;
  check(cublasGemmStridedBatchedEx(
            handle, p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(d.n), static_cast<int>(d.m),
            static_cast<int>(d.k), alpha, b.raw_data(), type, ldb, stride_b, a.raw_data(), type,
            lda, stride_a, beta, out.raw_data(), type, static_cast<int>(d.n), stride_c,
            static_cast<int>(d.batch), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
  if (bias.defined() || p.activation != Activation::kNone) {
    bias_activation_epilogue(out, bias, p.activation, p.alpha);
  }
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
          const MatmulParams& p) {
  if (a.dtype() != DType::kFloat32 && a.dtype() != DType::kFloat64) {
    throw_unsupported_dtype("matmul", a.dtype(), "float32, float64");
  }
  DeviceGuard guard(out.device());
  Dims d = dims_of(a, b, p);
  if (d.k == 0) {  // an empty sum: out = act(bias), or unchanged when accumulating
    if (!p.accumulate) {
      check(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream_of(out.device())),
            "cudaMemsetAsync (matmul with k = 0)");
      if (bias.defined() || p.activation != Activation::kNone) {
        bias_activation_epilogue(out, bias, p.activation, p.alpha);
      }
    }
    return;
  }
  bool lt_eligible = a.dtype() == DType::kFloat32 && d.batch == 1 && a.rank() == 2 &&
                     !p.accumulate &&
                     (p.activation == Activation::kNone || p.activation == Activation::kRelu);
  if (lt_eligible && matmul_lt(a, b, bias, out, p, d)) return;
  matmul_blas(a, b, bias, out, p, d);
}

void register_matmul_kernels() { kernels::matmul.set(DeviceType::kGPU, &gemm); }

}  // namespace cadre::backend::cuda
