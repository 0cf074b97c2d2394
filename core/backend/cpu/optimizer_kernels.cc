// CPU fused optimizer updates: one pass over each variable and its slots, with TensorFlow
// 2 (Keras) update rules.
#include <cmath>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/optimizer.h"

namespace cadre::backend::cpu {
namespace {

constexpr int64_t kGrain = 16384;

template <typename Fn>
void for_each_variable(std::span<Tensor> vars, const char* what, Fn&& fn) {
  for (size_t i = 0; i < vars.size(); ++i) {
    visit_float_dtype(vars[i].dtype(), what, [&]<typename T>() { fn.template operator()<T>(i); });
  }
}

void sgd(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> momenta,
         const kernels::SgdParams& p) {
  for_each_variable(vars, "sgd_update", [&]<typename T>(size_t v) {
    T* w = typed_mut<T>(vars[v]);
    const T* g = typed<T>(grads[v]);
    T lr = static_cast<T>(p.learning_rate), mu = static_cast<T>(p.momentum);
    int64_t n = vars[v].numel();
    if (p.momentum == 0) {
      parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) w[i] -= lr * g[i];
      });
      return;
    }
    T* vel = typed_mut<T>(momenta[v]);
    bool nesterov = p.nesterov;
    parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T velocity = mu * vel[i] - lr * g[i];
        vel[i] = velocity;
        w[i] += nesterov ? mu * velocity - lr * g[i] : velocity;
      }
    });
  });
}

void adam(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> m,
          std::span<Tensor> v, const kernels::AdamParams& p) {
  for_each_variable(vars, "adam_update", [&]<typename T>(size_t k) {
    T* w = typed_mut<T>(vars[k]);
    const T* g = typed<T>(grads[k]);
    T* pm = typed_mut<T>(m[k]);
    T* pv = typed_mut<T>(v[k]);
    T lr = static_cast<T>(p.learning_rate), b1 = static_cast<T>(p.beta1),
      b2 = static_cast<T>(p.beta2), eps = static_cast<T>(p.epsilon);
    T c1 = T(1) - b1, c2 = T(1) - b2;
    parallel_for(0, vars[k].numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = g[i];
        T mi = b1 * pm[i] + c1 * gi;
        T vi = b2 * pv[i] + c2 * gi * gi;
        pm[i] = mi;
        pv[i] = vi;
        w[i] -= lr * mi / (std::sqrt(vi) + eps);
      }
    });
  });
}

void adagrad(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> accum,
             const kernels::AdagradParams& p) {
  for_each_variable(vars, "adagrad_update", [&]<typename T>(size_t k) {
    T* w = typed_mut<T>(vars[k]);
    const T* g = typed<T>(grads[k]);
    T* a = typed_mut<T>(accum[k]);
    T lr = static_cast<T>(p.learning_rate), eps = static_cast<T>(p.epsilon);
    parallel_for(0, vars[k].numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        a[i] += g[i] * g[i];
        w[i] -= lr * g[i] / (std::sqrt(a[i]) + eps);
      }
    });
  });
}

void rmsprop(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> ms,
             std::span<Tensor> mom, std::span<Tensor> mg, const kernels::RmsPropParams& p) {
  for_each_variable(vars, "rmsprop_update", [&]<typename T>(size_t k) {
    T* w = typed_mut<T>(vars[k]);
    const T* g = typed<T>(grads[k]);
    T* s = typed_mut<T>(ms[k]);
    T* mo = p.momentum > 0 ? typed_mut<T>(mom[k]) : nullptr;
    T* a = p.centered ? typed_mut<T>(mg[k]) : nullptr;
    T lr = static_cast<T>(p.learning_rate), rho = static_cast<T>(p.rho),
      mu = static_cast<T>(p.momentum), eps = static_cast<T>(p.epsilon);
    parallel_for(0, vars[k].numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T gi = g[i];
        s[i] = rho * s[i] + (T(1) - rho) * gi * gi;
        T denominator = s[i];
        if (a != nullptr) {
          a[i] = rho * a[i] + (T(1) - rho) * gi;
          denominator -= a[i] * a[i];
        }
        T increment = lr * gi / std::sqrt(denominator + eps);
        if (mo != nullptr) {
          mo[i] = mu * mo[i] + increment;
          w[i] -= mo[i];
        } else {
          w[i] -= increment;
        }
      }
    });
  });
}

}  // namespace

void register_optimizer_kernels() {
  kernels::sgd_update.set(DeviceType::kCPU, &sgd);
  kernels::adam_update.set(DeviceType::kCPU, &adam);
  kernels::adagrad_update.set(DeviceType::kCPU, &adagrad);
  kernels::rmsprop_update.set(DeviceType::kCPU, &rmsprop);
}

}  // namespace cadre::backend::cpu
