// Per-element update rules of the fused optimizer kernels (TensorFlow 2 / Keras rules), which
// the CPU kernels (core/backend/cpu/optimizer_kernels.cc) and the CUDA kernels both apply,
// and the table that lets one CUDA launch update a whole list of variables: each variable
// owns a run of thread blocks, and a block finds its variable by binary search over the
// runs' starts.
#pragma once

#include <cstdint>

#include "core/backend/portable/scalar_math.h"
#include "core/kernels/optimizer.h"

namespace cadre::backend::portable {

template <typename T>
struct SgdRule {
  T lr, mu;
  bool momentum, nesterov;
  // slots: velocity (when momentum)
  CADRE_HOST_DEVICE void operator()(T& w, T g, T* s0, T*, T*) const {
    if (!momentum) {
      w -= lr * g;
      return;
    }
    T velocity = mu * *s0 - lr * g;
    *s0 = velocity;
    w += nesterov ? mu * velocity - lr * g : velocity;
  }
};

template <typename T>
struct AdamRule {
  T lr, b1, b2, eps, c1, c2;  // c1 = 1 - b1, c2 = 1 - b2
  // slots: m, v
  CADRE_HOST_DEVICE void operator()(T& w, T g, T* m, T* v, T*) const {
    T mi = b1 * *m + c1 * g;
    T vi = b2 * *v + c2 * g * g;
    *m = mi;
    *v = vi;
    w -= lr * mi / (m_sqrt(vi) + eps);
  }
};

template <typename T>
struct AdagradRule {
  T lr, eps;
  // slots: accumulator
  CADRE_HOST_DEVICE void operator()(T& w, T g, T* a, T*, T*) const {
    *a += g * g;
    w -= lr * g / (m_sqrt(*a) + eps);
  }
};

template <typename T>
struct RmsPropRule {
  T lr, rho, mu, eps;
  bool momentum, centered;
  // slots: mean square, momentum (when momentum), mean gradient (when centered)
  CADRE_HOST_DEVICE void operator()(T& w, T g, T* s, T* mo, T* a) const {
    *s = rho * *s + (T(1) - rho) * g * g;
    T denominator = *s;
    if (centered) {
      *a = rho * *a + (T(1) - rho) * g;
      denominator -= *a * *a;
    }
    T increment = lr * g / m_sqrt(denominator + eps);
    if (momentum) {
      *mo = mu * *mo + increment;
      w -= *mo;
    } else {
      w -= increment;
    }
  }
};

// The rules for the kernels' parameters (host code: each backend makes them per dtype).
template <typename T>
SgdRule<T> sgd_rule(const kernels::SgdParams& p) {
  return {static_cast<T>(p.learning_rate), static_cast<T>(p.momentum), p.momentum != 0, p.nesterov};
}
template <typename T>
AdamRule<T> adam_rule(const kernels::AdamParams& p) {
  T b1 = static_cast<T>(p.beta1), b2 = static_cast<T>(p.beta2);
  return {static_cast<T>(p.learning_rate), b1, b2, static_cast<T>(p.epsilon), T(1) - b1, T(1) - b2};
}
template <typename T>
AdagradRule<T> adagrad_rule(const kernels::AdagradParams& p) {
  return {static_cast<T>(p.learning_rate), static_cast<T>(p.epsilon)};
}
template <typename T>
RmsPropRule<T> rmsprop_rule(const kernels::RmsPropParams& p) {
  return {static_cast<T>(p.learning_rate), static_cast<T>(p.rho), static_cast<T>(p.momentum),
          static_cast<T>(p.epsilon),       p.momentum > 0,        p.centered};
}

// One variable of a fused update: its elements, gradient and up to three slots (null when
// the rule does not use them), and the first thread block of its run.
template <typename T>
struct UpdateEntry {
  T* w;
  const T* g;
  T* s0;
  T* s1;
  T* s2;
  int64_t n;
  int64_t first_block;
};

// Up to kCapacity variables per launch, passed by value as the kernel's parameter (well
// under CUDA's 32 KiB parameter limit), so that no table is copied to the device per step.
template <typename T>
struct UpdateTable {
  static constexpr int kCapacity = 128;
  UpdateEntry<T> entries[kCapacity];
  int count = 0;
  int64_t total_blocks = 0;

  bool full() const { return count == kCapacity; }
  // Appends a variable of n > 0 elements, giving it ceil(n / elements_per_block) blocks.
  void add(T* w, const T* g, T* s0, T* s1, T* s2, int64_t n, int64_t elements_per_block) {
    entries[count++] = {w, g, s0, s1, s2, n, total_blocks};
    total_blocks += (n + elements_per_block - 1) / elements_per_block;
  }
  void clear() {
    count = 0;
    total_blocks = 0;
  }

  // The entry whose run holds `block`: the last with first_block <= block.
  CADRE_HOST_DEVICE int locate(int64_t block) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (entries[mid].first_block <= block) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
};

// Applies `rule` to the elements of `block` (of `elements_per_block`), thread `thread` of
// `threads` taking every threads-th one.
template <typename T, typename Rule>
CADRE_HOST_DEVICE inline void update_block(const UpdateTable<T>& table, const Rule& rule,
                                           int64_t block, int64_t elements_per_block, int thread,
                                           int threads) {
  const UpdateEntry<T>& e = table.entries[table.locate(block)];
  int64_t begin = (block - e.first_block) * elements_per_block;
  int64_t end = begin + elements_per_block < e.n ? begin + elements_per_block : e.n;
  for (int64_t i = begin + thread; i < end; i += threads) {
    rule(e.w[i], e.g[i], e.s0 != nullptr ? e.s0 + i : nullptr, e.s1 != nullptr ? e.s1 + i : nullptr,
         e.s2 != nullptr ? e.s2 + i : nullptr);
  }
}

}  // namespace cadre::backend::portable
