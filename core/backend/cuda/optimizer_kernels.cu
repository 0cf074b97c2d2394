// CUDA fused optimizer updates: one launch updates every variable of a call (per dtype, up
// to UpdateTable::kCapacity variables), each variable owning a run of thread blocks. The
// table of pointers travels as the kernel's parameter, so a step copies nothing to the
// device. Update rules in core/backend/portable/optimizer_ops.h.
#include <algorithm>
#include <span>

#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/optimizer_ops.h"
#include "core/kernels/optimizer.h"

namespace cadre::backend::cuda {
namespace {

namespace p = portable;

constexpr int64_t kElementsPerBlock = 4 * kBlock;

template <typename T, typename Rule>
__global__ void update_kernel(const p::UpdateTable<T> table, const Rule rule) {
  for (int64_t block = blockIdx.x; block < table.total_blocks; block += gridDim.x) {
    p::update_block(table, rule, block, kElementsPerBlock, threadIdx.x, blockDim.x);
  }
}

// Slot k of variable i, or null when the optimizer keeps no such slot.
template <typename T>
T* slot(std::span<Tensor> slots, size_t i) {
  return slots.empty() || !slots[i].defined() ? nullptr : mut<T>(slots[i]);
}

// Updates the variables of dtype T with `rule`, in launches of up to kCapacity variables.
template <typename T, typename Rule>
void update_all(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> s0,
                std::span<Tensor> s1, std::span<Tensor> s2, const Rule& rule, const char* what) {
  p::UpdateTable<T> table;
  auto launch = [&] {
    if (table.count == 0) return;
    unsigned grid = static_cast<unsigned>(std::min<int64_t>(table.total_blocks, 65535));
    update_kernel<T, Rule><<<grid, kBlock, 0, stream_of(vars[0].device())>>>(table, rule);
    check(cudaGetLastError(), what);
    table.clear();
  };
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].dtype() != dtype_of<T> || vars[i].numel() == 0) continue;
    if (table.full()) launch();
    table.add(mut<T>(vars[i]), ptr<T>(grads[i]), slot<T>(s0, i), slot<T>(s1, i), slot<T>(s2, i),
              vars[i].numel(), kElementsPerBlock);
  }
  launch();
}

void check_dtypes(std::span<Tensor> vars, const char* what) {
  for (const Tensor& v : vars) {
    if (v.dtype() != DType::kFloat32 && v.dtype() != DType::kFloat64) {
      throw_unsupported_dtype(what, v.dtype(), "float32, float64");
    }
  }
}

// Runs make_rule.template operator()<T>() per dtype present and updates those variables.
template <typename MakeRule>
void fused(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> s0,
           std::span<Tensor> s1, std::span<Tensor> s2, const char* what, MakeRule&& make_rule) {
  if (vars.empty()) return;
  check_dtypes(vars, what);
  DeviceGuard guard(vars[0].device());
  update_all<float>(vars, grads, s0, s1, s2, make_rule.template operator()<float>(), what);
  update_all<double>(vars, grads, s0, s1, s2, make_rule.template operator()<double>(), what);
}

void sgd(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> momenta,
         const kernels::SgdParams& params) {
  fused(vars, grads, params.momentum != 0 ? momenta : std::span<Tensor>(), {}, {}, "sgd_update",
        [&]<typename T>() { return p::sgd_rule<T>(params); });
}

void adam(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> m,
          std::span<Tensor> v, const kernels::AdamParams& params) {
  fused(vars, grads, m, v, {}, "adam_update",
        [&]<typename T>() { return p::adam_rule<T>(params); });
}

void adagrad(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> accum,
             const kernels::AdagradParams& params) {
  fused(vars, grads, accum, {}, {}, "adagrad_update",
        [&]<typename T>() { return p::adagrad_rule<T>(params); });
}

void rmsprop(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> ms,
             std::span<Tensor> mom, std::span<Tensor> mg, const kernels::RmsPropParams& params) {
  fused(vars, grads, ms, params.momentum > 0 ? mom : std::span<Tensor>(),
        params.centered ? mg : std::span<Tensor>(), "rmsprop_update",
        [&]<typename T>() { return p::rmsprop_rule<T>(params); });
}

}  // namespace

void register_optimizer_kernels() {
  kernels::sgd_update.set(DeviceType::kGPU, &sgd);
  kernels::adam_update.set(DeviceType::kGPU, &adam);
  kernels::adagrad_update.set(DeviceType::kGPU, &adagrad);
  kernels::rmsprop_update.set(DeviceType::kGPU, &rmsprop);
}

}  // namespace cadre::backend::cuda
