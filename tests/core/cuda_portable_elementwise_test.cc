// The CUDA elementwise kernels' per-element bodies, run on the host over the same strided
// and broadcast operands as the CPU kernels, must give the CPU's bytes exactly: this is
// the part of the CUDA backend that a machine without a GPU can verify.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/backend/cuda/dispatch.h"
#include "core/backend/portable/elementwise_ops.h"
#include "core/backend/portable/index_ops.h"
#include "core/backend/portable/reduce_ops.h"
#include "core/backend/portable/softmax_ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/indexing.h"
#include "core/kernels/linalg.h"
#include "core/kernels/nn.h"
#include "core/kernels/reduction.h"
#include "core/tensor/views.h"
#include "tests/core/portable_test_util.h"

namespace cadre {
namespace {

namespace p = backend::portable;
using kernels::Activation;
using kernels::BinaryOp;
using kernels::UnaryOp;
using testing::host_ptr;
using testing::kCpu;
using testing::poisoned;
using testing::random_values;
using testing::run_on_host;
using testing::same_bytes;

using testing::kNumeric;

// [5, 7] views of x's values: contiguous, transposed, strided (every other column) and
// broadcast along rows.
std::vector<Tensor> strided_variants(DType dtype, uint64_t seed) {
  return {random_values({5, 7}, dtype, seed),
          random_values({7, 5}, dtype, seed + 1).transpose({1, 0}),
          random_values({5, 14}, dtype, seed + 2).slice(1, 0, 14, 2),
          views::broadcast(random_values({1, 7}, dtype, seed + 3), Shape{5, 7}, "test")};
}

TEST(CudaPortableTest, OffsetsMatchTheStrides) {
  Tensor base = random_values({4, 6, 10}, DType::kFloat32, 1);
  std::vector<Tensor> views = {base, base.transpose({2, 0, 1}), base.slice(2, 1, 9, 3),
                               views::broadcast(base.slice(1, 2, 3), Shape{4, 6, 10}, "test"),
                               base.slice(0, 1, 3).slice(1, 0, 6, 5)};
  for (const Tensor& v : views) {
    Tensor other = Tensor::empty(v.shape(), DType::kFloat32, kCpu);
    auto at = p::make_offsets<2>({&other, &v});
    std::vector<int64_t> index(v.rank(), 0);
    for (int64_t i = 0; i < v.numel(); ++i) {
      int64_t expect_v = 0, expect_other = 0;
      for (int d = 0; d < v.rank(); ++d) {
        expect_v += index[d] * v.strides()[d];
        expect_other += index[d] * other.strides()[d];
      }
      int64_t got[2];
      at.get(i, got);
      ASSERT_EQ(got[0], expect_other) << v.shape() << " element " << i;
      ASSERT_EQ(got[1], expect_v) << v.shape() << " element " << i;
      for (int d = v.rank() - 1; d >= 0 && ++index[d] == v.shape()[d]; --d) index[d] = 0;
    }
  }
}

TEST(CudaPortableTest, SixteenBitConversionsMatchTheCpu) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    BFloat16 b;
    b.bits = static_cast<uint16_t>(bits);
    Float16 h;
    h.bits = static_cast<uint16_t>(bits);
    float fb = static_cast<float>(b), fh = static_cast<float>(h);
    float gb = p::from_bf16({static_cast<uint16_t>(bits)});
    float gh = p::from_half({static_cast<uint16_t>(bits)});
    ASSERT_EQ(std::memcmp(&fb, &gb, 4), 0) << "bfloat16 bits " << bits;
    ASSERT_EQ(std::memcmp(&fh, &gh, 4), 0) << "float16 bits " << bits;
  }
  // Every float whose top 16 bits vary, with low bits at the rounding boundaries.
  for (uint32_t high = 0; high < 65536; ++high) {
    for (uint32_t low : {0u, 1u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      float f = p::bits_float((high << 16) | low);
      ASSERT_EQ(BFloat16(f).bits, p::to_bf16(f).bits) << "float bits " << ((high << 16) | low);
      ASSERT_EQ(Float16(f).bits, p::to_half(f).bits) << "float bits " << ((high << 16) | low);
    }
  }
}

template <typename T>
void check_unary(UnaryOp op, const Tensor& x, bool strided_out) {
  bool predicate = p::unary_is_predicate(op);
  DType out_dtype = predicate ? DType::kBool : x.dtype();
  Tensor cpu_base = poisoned({7, 5}, out_dtype), host_base = poisoned({7, 5}, out_dtype);
  Tensor cpu = strided_out ? cpu_base.transpose({1, 0}) : poisoned({5, 7}, out_dtype);
  Tensor host = strided_out ? host_base.transpose({1, 0}) : poisoned({5, 7}, out_dtype);
  kernels::unary.get(kCpu)(op, x, cpu);
  auto at = p::make_offsets<2>({&host, &x});
  if (predicate) {
    run_on_host(host.numel(),
                p::UnaryElement<T, bool>{host_ptr<T>(x), host_ptr<bool>(host), op, at});
  } else if constexpr (!std::is_same_v<T, bool>) {
    run_on_host(host.numel(), p::UnaryElement<T, T>{host_ptr<T>(x), host_ptr<T>(host), op, at});
  }
  EXPECT_TRUE(same_bytes(strided_out ? host_base : host, strided_out ? cpu_base : cpu))
      << "unary op " << static_cast<int>(op) << " on " << x.dtype() << " " << x.strides()[0];
}

TEST(CudaPortableTest, UnaryOpsMatchTheCpu) {
  for (DType dtype : kNumeric) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      for (int o = 0; o <= static_cast<int>(UnaryOp::kIsFinite); ++o) {
        auto op = static_cast<UnaryOp>(o);
        if (!p::unary_defined<T>(op)) continue;
        int variant = 0;
        for (const Tensor& x : strided_variants(dtype, 10 + o)) {
          check_unary<T>(op, x, variant++ == 1);
        }
      }
    });
  }
}

TEST(CudaPortableTest, BinaryOpsMatchTheCpu) {
  Shape shape{4, 3, 5};
  for (DType dtype : kNumeric) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      for (int o = 0; o <= static_cast<int>(BinaryOp::kLogicalOr); ++o) {
        auto op = static_cast<BinaryOp>(o);
        if (!p::binary_defined<T>(op)) continue;
        // Out-of-range integer powers would convert out of range (undefined): keep them small.
        if (op == BinaryOp::kPow && (dtype == DType::kUInt8 || is_integral(dtype))) continue;
        std::vector<std::pair<Tensor, Tensor>> operands = {
            {views::broadcast(random_values({4, 1, 5}, dtype, o), shape, "test"),
             views::broadcast(random_values({3, 5}, dtype, o + 50), shape, "test")},
            {random_values({5, 3, 4}, dtype, o + 100).transpose({2, 1, 0}),
             views::broadcast(random_values({}, dtype, o + 150), shape, "test")},
            {random_values(shape, dtype, o + 200), random_values(shape, dtype, o + 250)}};
        for (auto& [a, b] : operands) {
          bool boolean = p::binary_is_comparison(op) || p::binary_is_logical(op);
          DType out_dtype = boolean ? DType::kBool : dtype;
          Tensor cpu = poisoned(shape, out_dtype), host = poisoned(shape, out_dtype);
          kernels::binary.get(kCpu)(op, a, b, cpu);
          auto at = p::make_offsets<3>({&host, &a, &b});
          if (boolean) {
            run_on_host(host.numel(), p::BinaryElement<T, bool>{host_ptr<T>(a), host_ptr<T>(b),
                                                                host_ptr<bool>(host), op, at});
          } else if constexpr (!std::is_same_v<T, bool>) {
            run_on_host(host.numel(), p::BinaryElement<T, T>{host_ptr<T>(a), host_ptr<T>(b),
                                                             host_ptr<T>(host), op, at});
          }
          EXPECT_TRUE(same_bytes(host, cpu)) << "binary op " << o << " on " << dtype;
        }
      }
    });
  }
}

TEST(CudaPortableTest, IntegerPowersMatchTheCpu) {
  Tensor a = cast(Tensor::from_vector<double>({-3, -2, 0, 1, 2, 5, 7, 3}), DType::kInt32);
  Tensor b = cast(Tensor::from_vector<double>({0, 1, 2, 3, 2, 1, 0, 4}), DType::kInt32);
  Tensor cpu = poisoned({8}, DType::kInt32), host = poisoned({8}, DType::kInt32);
  kernels::binary.get(kCpu)(BinaryOp::kPow, a, b, cpu);
  run_on_host(8, p::BinaryElement<int32_t, int32_t>{host_ptr<int32_t>(a), host_ptr<int32_t>(b),
                                                    host_ptr<int32_t>(host), BinaryOp::kPow,
                                                    p::make_offsets<3>({&host, &a, &b})});
  EXPECT_TRUE(same_bytes(host, cpu));
}

TEST(CudaPortableTest, CastsMatchTheCpuForEveryPair) {
  const DType all[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,    DType::kInt64,
                       DType::kUInt8,   DType::kBool,    DType::kBFloat16, DType::kFloat16};
  for (DType from : all) {
    for (DType to : all) {
      // NaN, infinities, negatives and values past the target's range included: a float
      // becomes an integer truncated and saturated, NaN as 0, on every backend.
      Tensor values = random_values({7, 5}, DType::kFloat64, 7, /*specials=*/true) * 1e10;
      Tensor x = cast(values, from).transpose({1, 0});
      Tensor cpu = poisoned({5, 7}, to), host = poisoned({5, 7}, to);
      kernels::cast.get(kCpu)(x, cpu);
      backend::cuda::visit_storage(from, [&]<typename From>() {
        backend::cuda::visit_storage(to, [&]<typename To>() {
          run_on_host(host.numel(), p::CastElement<From, To>{host_ptr<From>(x), host_ptr<To>(host),
                                                             p::make_offsets<2>({&host, &x})});
        });
      });
      EXPECT_TRUE(same_bytes(host, cpu)) << from << " -> " << to;
    }
  }
}

TEST(CudaPortableTest, WhereAndClipMatchTheCpu) {
  Shape shape{5, 7};
  Tensor cond = views::broadcast(random_values({1, 7}, DType::kBool, 3), shape, "test");
  for (DType dtype : kNumeric) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      std::vector<Tensor> x = strided_variants(dtype, 30);
      Tensor cpu = poisoned(shape, dtype), host = poisoned(shape, dtype);
      kernels::where.get(kCpu)(cond, x[1], x[3], cpu);
      run_on_host(
          host.numel(),
          p::WhereElement<T>{host_ptr<bool>(cond), host_ptr<T>(x[1]), host_ptr<T>(x[3]),
                             host_ptr<T>(host), p::make_offsets<4>({&host, &cond, &x[1], &x[3]})});
      EXPECT_TRUE(same_bytes(host, cpu)) << "where on " << dtype;
      if constexpr (!std::is_same_v<T, bool>) {
        // Bounds the type can hold (a negative bound for uint8 would convert undefined).
        double lo = is_floating(dtype) ? -1.5 : 3, hi = is_floating(dtype) ? 2.0 : 20;
        for (const Tensor& v : x) {
          Tensor c = poisoned(shape, dtype), h = poisoned(shape, dtype);
          kernels::clip.get(kCpu)(v, lo, hi, c);
          run_on_host(h.numel(),
                      p::ClipElement<T>{host_ptr<T>(v), host_ptr<T>(h), static_cast<T>(lo),
                                        static_cast<T>(hi), p::make_offsets<2>({&h, &v})});
          EXPECT_TRUE(same_bytes(h, c)) << "clip on " << dtype;
        }
      }
    });
  }
}

TEST(CudaPortableTest, ActivationsAndGradientsMatchTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    visit_float_dtype(dtype, "test", [&]<typename T>() {
      for (int a = 0; a <= static_cast<int>(Activation::kSoftplus); ++a) {
        auto act = static_cast<Activation>(a);
        std::vector<Tensor> x = strided_variants(dtype, 40 + a);
        for (size_t v = 0; v < x.size(); ++v) {
          Tensor cpu = poisoned({5, 7}, dtype), host = poisoned({5, 7}, dtype);
          kernels::activation.get(kCpu)(act, 0.2, x[v], cpu);
          run_on_host(host.numel(),
                      p::ActivationElement<T>{host_ptr<T>(x[v]), host_ptr<T>(host), act, T(0.2),
                                              p::make_offsets<2>({&host, &x[v]})});
          EXPECT_TRUE(same_bytes(host, cpu)) << "activation " << a << " variant " << v;
          const Tensor& dy = x[(v + 1) % x.size()];
          Tensor dcpu = poisoned({5, 7}, dtype), dhost = poisoned({5, 7}, dtype);
          kernels::activation_grad.get(kCpu)(act, 0.2, x[v], dy, dcpu);
          run_on_host(dhost.numel(), p::ActivationGradElement<T>{
                                         host_ptr<T>(x[v]), host_ptr<T>(dy), host_ptr<T>(dhost),
                                         act, T(0.2), p::make_offsets<3>({&dhost, &x[v], &dy})});
          EXPECT_TRUE(same_bytes(dhost, dcpu)) << "activation_grad " << a << " variant " << v;
        }
      }
    });
  }
}

TEST(CudaPortableTest, MatmulEpilogueMatchesTheCpu) {
  // float64 products on the CPU apply bias and activation in double, as the epilogue does.
  Tensor a = random_values({6, 4}, DType::kFloat64, 1, false);
  Tensor b = random_values({4, 9}, DType::kFloat64, 2, false);
  Tensor bias = random_values({9}, DType::kFloat64, 3, false);
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kSigmoid,
                         Activation::kTanh, Activation::kElu}) {
    kernels::MatmulParams plain, fused;
    fused.activation = act;
    fused.alpha = 0.7;
    Tensor cpu = poisoned({6, 9}, DType::kFloat64), host = poisoned({6, 9}, DType::kFloat64);
    kernels::matmul.get(kCpu)(a, b, bias, cpu, fused);
    kernels::matmul.get(kCpu)(a, b, Tensor(), host, plain);
    run_on_host(host.numel(), p::BiasActivationElement<double>{
                                  host_ptr<double>(host), host_ptr<double>(bias), 9, act, 0.7});
    EXPECT_TRUE(same_bytes(host, cpu)) << "activation " << static_cast<int>(act);
  }
}

TEST(CudaPortableTest, ArgReduceAndExtremesMatchTheCpu) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kUInt8}) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      Tensor x = random_values({3, 37, 4}, dtype, 60);
      for (auto op : {kernels::ArgReduceOp::kArgMax, kernels::ArgReduceOp::kArgMin}) {
        Tensor cpu = poisoned({3, 4}, DType::kInt64), host = poisoned({3, 4}, DType::kInt64);
        kernels::arg_reduce.get(kCpu)(op, x, cpu);
        run_on_host(12, p::ArgReduceElement<T>{host_ptr<T>(x), host_ptr<int64_t>(host), 37, 4,
                                               op == kernels::ArgReduceOp::kArgMax});
        EXPECT_TRUE(same_bytes(host, cpu)) << dtype;
      }
      // Max and min combine in any order to the same value; NaN wins.
      for (auto op : {kernels::ReduceOp::kMax, kernels::ReduceOp::kMin}) {
        Tensor cpu = poisoned({3, 4}, dtype), host = poisoned({3, 4}, dtype);
        kernels::reduce.get(kCpu)(op, x, cpu);
        const T* px = host_ptr<T>(x);
        for (int64_t o = 0; o < 3; ++o) {
          for (int64_t i = 0; i < 4; ++i) {
            T acc = op == kernels::ReduceOp::kMax ? p::MaxOp<T>::init() : p::MinOp<T>::init();
            for (int64_t r = 36; r >= 0; --r) {  // the opposite order to the CPU's
              T v = px[(o * 37 + r) * 4 + i];
              acc = op == kernels::ReduceOp::kMax ? p::MaxOp<T>::combine(acc, v)
                                                  : p::MinOp<T>::combine(acc, v);
            }
            host_ptr<T>(host)[o * 4 + i] = acc;
          }
        }
        EXPECT_TRUE(same_bytes(host, cpu)) << dtype;
      }
    });
  }
  EXPECT_TRUE(std::isnan(p::finish_reduction<float>(0.0, true, 0)));
  EXPECT_EQ(p::finish_reduction<int32_t>(int64_t{7}, true, 2), 3);
}

TEST(CudaPortableTest, GatherOneHotAndCrossEntropyGradientMatchTheCpu) {
  Tensor params = random_values({2, 9, 3}, DType::kFloat32, 70);
  for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
    Tensor idx = cast(Tensor::from_vector<double>({8, 0, 3, 3, 5}), index_dtype);
    Tensor cpu = poisoned({2, 5, 3}, DType::kFloat32), host = poisoned({2, 5, 3}, DType::kFloat32);
    kernels::gather.get(kCpu)(params, idx, cpu);
    Tensor hot_cpu = poisoned({5, 9}, DType::kFloat64),
           hot_host = poisoned({5, 9}, DType::kFloat64);
    Tensor with_bad = cast(Tensor::from_vector<double>({8, -1, 3, 9, 5}), index_dtype);
    kernels::one_hot.get(kCpu)(with_bad, 2.5, -1, hot_cpu);
    Tensor probs = random_values({5, 9}, DType::kFloat32, 71, false);
    Tensor dloss = random_values({5}, DType::kFloat32, 72, false);
    Tensor dx_cpu = poisoned({5, 9}, DType::kFloat32), dx_host = poisoned({5, 9}, DType::kFloat32);
    kernels::sparse_xent_grad.get(kCpu)(probs, idx, dloss, dx_cpu);
    auto run = [&]<typename I>() {
      run_on_host(host.numel(),
                  p::GatherElement<uint32_t, I>{host_ptr<uint32_t>(params), host_ptr<I>(idx),
                                                host_ptr<uint32_t>(host), 9, 5, 3});
      run_on_host(hot_host.numel(),
                  p::OneHotElement<double, I>{host_ptr<I>(with_bad), host_ptr<double>(hot_host), 9,
                                              2.5, -1});
      run_on_host(dx_host.numel(), p::XentGradElement<float, I>{
                                       host_ptr<float>(probs), host_ptr<I>(idx),
                                       host_ptr<float>(dloss), host_ptr<float>(dx_host), 9});
    };
    if (index_dtype == DType::kInt32) {
      run.template operator()<int32_t>();
    } else {
      run.template operator()<int64_t>();
    }
    EXPECT_TRUE(same_bytes(host, cpu)) << index_dtype;
    EXPECT_TRUE(same_bytes(hot_host, hot_cpu)) << index_dtype;
    EXPECT_TRUE(same_bytes(dx_host, dx_cpu)) << index_dtype;
  }
}

}  // namespace
}  // namespace cadre
