// CPU random kernels on Philox4x32-10 (core/random/philox.h).
#include <cmath>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/random.h"
#include "core/random/philox.h"

namespace cadre::backend::cpu {
namespace {

using kernels::RandomDistribution;

constexpr int64_t kBlocksPerChunk = 4096;

template <typename T>
void uniform(double lo, double hi, PhiloxKey key, T* out, int64_t n) {
  int64_t blocks = (n + 3) / 4;
  parallel_for(0, blocks, kBlocksPerChunk, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      philox::Block r = philox::block(key.key, key.offset + static_cast<uint64_t>(blk));
      // A double takes two words: the second from the same block number, attempt 1.
      philox::Block w{};
      if constexpr (std::is_same_v<T, double>) {
        w = philox::block(key.key, key.offset + static_cast<uint64_t>(blk), 1);
      }
      for (int j = 0; j < 4; ++j) {
        int64_t i = blk * 4 + j;
        if (i >= n) break;
        if constexpr (std::is_same_v<T, float>) {
          out[i] = static_cast<float>(lo + (hi - lo) * philox::to_unit_float(r.v[j]));
        } else {
          out[i] = lo + (hi - lo) * philox::to_unit_double(r.v[j], w.v[j]);
        }
      }
    }
  });
}

template <typename T>
void normal(double mean, double stddev, PhiloxKey key, T* out, int64_t n) {
  int64_t blocks = (n + 1) / 2;
  parallel_for(0, blocks, kBlocksPerChunk, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      philox::Block r = philox::block(key.key, key.offset + static_cast<uint64_t>(blk));
      double z0, z1;
      philox::box_muller(r.v[0], r.v[1], z0, z1);
      int64_t i = blk * 2;
      out[i] = static_cast<T>(mean + stddev * z0);
      if (i + 1 < n) out[i + 1] = static_cast<T>(mean + stddev * z1);
    }
  });
}

template <typename T>
void truncated(double mean, double stddev, PhiloxKey key, T* out, int64_t n) {
  parallel_for(0, n, kBlocksPerChunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      double value = 0;
      for (uint32_t attempt = 0;; ++attempt) {
        philox::Block r = philox::block(key.key, key.offset + static_cast<uint64_t>(i), attempt);
        double z0, z1;
        philox::box_muller(r.v[0], r.v[1], z0, z1);
        if (std::abs(z0) <= 2) {
          value = z0;
          break;
        }
        if (std::abs(z1) <= 2) {
          value = z1;
          break;
        }
        philox::box_muller(r.v[2], r.v[3], z0, z1);
        if (std::abs(z0) <= 2) {
          value = z0;
          break;
        }
        if (std::abs(z1) <= 2) {
          value = z1;
          break;
        }
      }
      out[i] = static_cast<T>(mean + stddev * value);
    }
  });
}

void random(RandomDistribution dist, double a, double b, PhiloxKey key, Tensor& out) {
  visit_float_dtype(out.dtype(), "random", [&]<typename T>() {
    T* p = typed_mut<T>(out);
    int64_t n = out.numel();
    switch (dist) {
      case RandomDistribution::kUniform:
        return uniform<T>(a, b, key, p, n);
      case RandomDistribution::kNormal:
        return normal<T>(a, b, key, p, n);
      case RandomDistribution::kTruncatedNormal:
        return truncated<T>(a, b, key, p, n);
    }
  });
}

void dropout_mask(double rate, PhiloxKey key, Tensor& mask) {
  visit_float_dtype(mask.dtype(), "dropout", [&]<typename T>() {
    T* p = typed_mut<T>(mask);
    int64_t n = mask.numel();
    T scale = static_cast<T>(1.0 / (1.0 - rate));
    float threshold = static_cast<float>(rate);
    int64_t blocks = (n + 3) / 4;
    parallel_for(0, blocks, kBlocksPerChunk, [&](int64_t b, int64_t e) {
      for (int64_t blk = b; blk < e; ++blk) {
        philox::Block r = philox::block(key.key, key.offset + static_cast<uint64_t>(blk));
        for (int j = 0; j < 4; ++j) {
          int64_t i = blk * 4 + j;
          if (i >= n) break;
          p[i] = philox::to_unit_float(r.v[j]) >= threshold ? scale : T(0);
        }
      }
    });
  });
}

}  // namespace

void register_random_kernels() {
  kernels::random.set(DeviceType::kCPU, &random);
  kernels::dropout_mask.set(DeviceType::kCPU, &dropout_mask);
}

}  // namespace cadre::backend::cpu
