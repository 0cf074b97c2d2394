// CPU fused optimizer updates: one pass over each variable and its slots, with TensorFlow
// 2 (Keras) update rules.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/portable/optimizer_ops.h"
#include "core/kernels/optimizer.h"

namespace cadre::backend::cpu {
namespace {

constexpr int64_t kGrain = 16384;

// Slot k of variable i, or null when the optimizer keeps no such slot.
template <typename T>
T* slot(std::span<Tensor> slots, size_t i) {
  return slots.empty() || !slots[i].defined() ? nullptr : typed_mut<T>(slots[i]);
}

// Where the old values of the tensors at w, a, b and c go before the rule writes them, from
// the kernel's copy_out: for each tensor, ranges of its elements (the whole tensor, or rows
// of it that a checkpoint part holds) with their destinations. Each CopyOut found is marked
// in `made`.
template <typename T>
class CopiesOut {
 public:
  using Tensors = std::array<const T*, 4>;  // w, a, b, c (null: no such slot)

  CopiesOut(std::span<const kernels::CopyOut> copy_out, std::vector<bool>& made,
            const Tensors& from, int64_t n) {
    const uintptr_t bytes = static_cast<uintptr_t>(n) * sizeof(T);
    for (size_t k = 0; k < copy_out.size(); ++k) {
      const kernels::CopyOut& out = copy_out[k];
      const uintptr_t begin = reinterpret_cast<uintptr_t>(out.from);
      for (size_t t = 0; t < from.size() && !made[k]; ++t) {
        const uintptr_t base = reinterpret_cast<uintptr_t>(from[t]);
        if (from[t] == nullptr || begin < base || begin - base + out.bytes > bytes ||
            (begin - base) % sizeof(T) != 0 || out.bytes % sizeof(T) != 0) {
          continue;
        }
        int64_t first = static_cast<int64_t>((begin - base) / sizeof(T));
        ranges_[t].push_back(
            {first, first + static_cast<int64_t>(out.bytes / sizeof(T)), static_cast<T*>(out.to)});
        made[k] = true;
      }
    }
  }

  // Copies out what of elements [begin, end) of each tensor a range holds.
  void copy(const Tensors& from, int64_t begin, int64_t end) const {
    for (size_t t = 0; t < ranges_.size(); ++t) {
      for (const Range& r : ranges_[t]) {  // a range or two: a tensor, or a part's rows of it
        int64_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
        if (lo < hi) {
          std::memcpy(r.to + (lo - r.begin), from[t] + lo,
                      static_cast<size_t>(hi - lo) * sizeof(T));
        }
      }
    }
  }

 private:
  struct Range {
    int64_t begin, end;  // elements of the tensor
    T* to;               // where element `begin` goes
  };
  std::array<std::vector<Range>, 4> ranges_;
};

// rule(w[i], g[i], &a[i], &b[i], &c[i]) for i in [begin, end), the slots a rule does not keep
// passed as null. Which slots exist is a compile-time constant, so that the loop has no
// per-element test and vectorises; everything it reads is a parameter, so that nothing it
// writes can alias the rule or the pointers.
template <bool kA, bool kB, bool kC, typename T, typename Rule>
void update(Rule rule, T* w, const T* g, T* a, T* b, T* c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    rule(w[i], g[i], kA ? a + i : nullptr, kB ? b + i : nullptr, kC ? c + i : nullptr);
  }
}

// update() over n elements in chunks, each chunk's old values first copied out where `out`
// says (into the checkpoint's copy; the rule then reads them from cache).
template <bool kA, bool kB, bool kC, typename T, typename Rule>
void apply(const Rule& rule, T* w, const T* g, T* a, T* b, T* c, int64_t n,
           const CopiesOut<T>& out) {
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    out.copy({w, a, b, c}, begin, end);
    update<kA, kB, kC>(rule, w, g, a, b, c, begin, end);
  });
}

// Copies out every tensor of copy_out first, chunk by chunk (CopiesOut), or at the end when
// the rule wrote no such tensor.
template <typename MakeRule>
void fused(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> s0,
           std::span<Tensor> s1, std::span<Tensor> s2, std::span<const kernels::CopyOut> copy_out,
           const char* what, MakeRule&& make_rule) {
  std::vector<bool> made(copy_out.size(), false);
  for (size_t k = 0; k < vars.size(); ++k) {
    visit_float_dtype(vars[k].dtype(), what, [&]<typename T>() {
      const auto rule = make_rule.template operator()<T>();
      T* w = typed_mut<T>(vars[k]);
      const T* g = typed<T>(grads[k]);
      T* a = slot<T>(s0, k);
      T* b = slot<T>(s1, k);
      T* c = slot<T>(s2, k);
      int64_t n = vars[k].numel();
      CopiesOut<T> out(copy_out, made, {w, a, b, c}, n);
      switch ((a != nullptr) | (b != nullptr) << 1 | (c != nullptr) << 2) {
        case 0:
          return apply<false, false, false>(rule, w, g, a, b, c, n, out);
        case 1:
          return apply<true, false, false>(rule, w, g, a, b, c, n, out);
        case 3:
          return apply<true, true, false>(rule, w, g, a, b, c, n, out);
        case 5:
          return apply<true, false, true>(rule, w, g, a, b, c, n, out);
        default:
          return apply<true, true, true>(rule, w, g, a, b, c, n, out);
      }
    });
  }
  for (size_t k = 0; k < copy_out.size(); ++k) {
    if (!made[k]) copy_out[k].make();
  }
}

void sgd(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> momenta,
         const kernels::SgdParams& params) {
  fused(vars, grads, params.momentum != 0 ? momenta : std::span<Tensor>(), {}, {}, params.copy_out,
        "sgd_update", [&]<typename T>() { return portable::sgd_rule<T>(params); });
}

void adam(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> m,
          std::span<Tensor> v, const kernels::AdamParams& params) {
  fused(vars, grads, m, v, {}, params.copy_out, "adam_update",
        [&]<typename T>() { return portable::adam_rule<T>(params); });
}

void adagrad(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> accum,
             const kernels::AdagradParams& params) {
  fused(vars, grads, accum, {}, {}, params.copy_out, "adagrad_update",
        [&]<typename T>() { return portable::adagrad_rule<T>(params); });
}

void rmsprop(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> ms,
             std::span<Tensor> mom, std::span<Tensor> mg, const kernels::RmsPropParams& params) {
  fused(vars, grads, ms, params.momentum > 0 ? mom : std::span<Tensor>(),
        params.centered ? mg : std::span<Tensor>(), params.copy_out, "rmsprop_update",
        [&]<typename T>() { return portable::rmsprop_rule<T>(params); });
}

}  // namespace

void register_optimizer_kernels() {
  kernels::sgd_update.set(DeviceType::kCPU, &sgd);
  kernels::adam_update.set(DeviceType::kCPU, &adam);
  kernels::adagrad_update.set(DeviceType::kCPU, &adagrad);
  kernels::rmsprop_update.set(DeviceType::kCPU, &rmsprop);
}

}  // namespace cadre::backend::cpu
