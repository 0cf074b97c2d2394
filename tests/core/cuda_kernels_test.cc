// Every elementwise, reduction, indexing and random kernel on gpu:0 against cpu:0, on
// fresh random inputs (strided and broadcast views included) and poisoned outputs.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include "core/backend/portable/op_math.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/indexing.h"
#include "core/kernels/linalg.h"
#include "core/kernels/random.h"
#include "core/kernels/reduction.h"
#include "core/tensor/views.h"
#include "tests/core/cuda_test_util.h"
#include "tests/core/portable_test_util.h"

namespace cadre {
namespace {

namespace p = backend::portable;
using kernels::BinaryOp;
using kernels::UnaryOp;
using testing::Both;
using testing::CudaTest;
using testing::kGpu;
using testing::kHost;
using testing::matches;
using testing::poisoned_both;
using testing::random_both;
using testing::ulps;
using testing::view;

using testing::kNumeric;
const DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,    DType::kInt64,
                      DType::kUInt8,   DType::kBool,    DType::kBFloat16, DType::kFloat16};

// [37, 53] views: contiguous, transposed, every other column, broadcast rows.
std::vector<Both> variants(DType dtype, uint64_t seed, bool specials = true) {
  return {random_both({37, 53}, dtype, seed, specials),
          view(random_both({53, 37}, dtype, seed + 1, specials),
               [](const Tensor& t) {
                 return t.transpose({1, 0});
               }),
          view(random_both({37, 106}, dtype, seed + 2, specials),
               [](const Tensor& t) { return t.slice(1, 0, 106, 2); }),
          view(random_both({1, 53}, dtype, seed + 3, specials), [](const Tensor& t) {
            return views::broadcast(t, Shape{37, 53}, "test");
          })};
}

TEST_F(CudaTest, FillAndCopyEveryDtypeAndLayout) {
  for (DType dtype : kAll) {
    Both out = poisoned_both({53, 37}, dtype);
    Both t = view(out, [](const Tensor& x) { return x.transpose({1, 0}); });
    kernels::fill.get(kGpu)(t.gpu, 3.0);
    kernels::fill.get(kHost)(t.cpu, 3.0);
    EXPECT_TRUE(matches(out, 0)) << dtype;
    for (const Both& src : variants(dtype, 1, false)) {
      Both dst = poisoned_both({53, 37}, dtype);
      Both dst_t = view(dst, [](const Tensor& x) { return x.transpose({1, 0}); });
      kernels::copy.get(kGpu)(src.gpu, dst_t.gpu);
      kernels::copy.get(kHost)(src.cpu, dst_t.cpu);
      EXPECT_TRUE(matches(dst, 0)) << dtype;
    }
  }
}

TEST_F(CudaTest, CastEveryPair) {
  for (DType from : kAll) {
    for (DType to : kAll) {
      bool integral_target = is_integral(to);
      Tensor values = testing::random_values({37, 53}, DType::kFloat64, 2, !integral_target);
      if (integral_target) values = abs(values);
      Both x = view(testing::both(cast(values, from)), [](const Tensor& t) { return t; });
      Both out = poisoned_both({37, 53}, to);
      kernels::cast.get(kGpu)(x.gpu, out.gpu);
      kernels::cast.get(kHost)(x.cpu, out.cpu);
      EXPECT_TRUE(matches(out, 0)) << from << " -> " << to;
    }
  }
}

TEST_F(CudaTest, UnaryOpsEveryDtype) {
  for (DType dtype : kNumeric) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      for (int o = 0; o <= static_cast<int>(UnaryOp::kIsFinite); ++o) {
        auto op = static_cast<UnaryOp>(o);
        if (!p::unary_defined<T>(op)) continue;
        DType out_dtype = p::unary_is_predicate(op) ? DType::kBool : dtype;
        for (const Both& x : variants(dtype, 10 + o)) {
          Both out = poisoned_both({37, 53}, out_dtype);
          kernels::unary.get(kGpu)(op, x.gpu, out.gpu);
          kernels::unary.get(kHost)(op, x.cpu, out.cpu);
          EXPECT_TRUE(matches(out, ulps(dtype), 1e-37)) << "op " << o << " " << dtype;
        }
      }
    });
  }
}

TEST_F(CudaTest, BinaryOpsEveryDtypeWithBroadcasting) {
  Shape shape{6, 35, 17};
  for (DType dtype : kNumeric) {
    visit_dtype(dtype, "test", [&]<typename T>() {
      for (int o = 0; o <= static_cast<int>(BinaryOp::kLogicalOr); ++o) {
        auto op = static_cast<BinaryOp>(o);
        if (!p::binary_defined<T>(op) || (op == BinaryOp::kPow && !is_floating(dtype))) continue;
        auto to_shape = [&](const Tensor& t) { return views::broadcast(t, shape, "test"); };
        Both a = view(random_both({6, 1, 17}, dtype, o, true), to_shape);
        Both b = view(random_both({35, 17}, dtype, o + 1, true), to_shape);
        Both c = view(random_both({17, 35, 6}, dtype, o + 2, true), [](const Tensor& t) {
          return t.transpose({2, 1, 0});
        });
        bool boolean = p::binary_is_comparison(op) || p::binary_is_logical(op);
        for (auto [x, y] : {std::pair{a, b}, std::pair{c, a}, std::pair{c, c}}) {
          Both out = poisoned_both(shape, boolean ? DType::kBool : dtype);
          kernels::binary.get(kGpu)(op, x.gpu, y.gpu, out.gpu);
          kernels::binary.get(kHost)(op, x.cpu, y.cpu, out.cpu);
          EXPECT_TRUE(matches(out, ulps(dtype), 1e-37)) << "op " << o << " " << dtype;
        }
      }
    });
  }
}

TEST_F(CudaTest, WhereClipAndActivations) {
  Both cond = view(random_both({1, 53}, DType::kBool, 5), [](const Tensor& t) {
    return views::broadcast(t, Shape{37, 53}, "test");
  });
  for (DType dtype : kNumeric) {
    std::vector<Both> x = variants(dtype, 20);
    Both out = poisoned_both({37, 53}, dtype);
    kernels::where.get(kGpu)(cond.gpu, x[1].gpu, x[2].gpu, out.gpu);
    kernels::where.get(kHost)(cond.cpu, x[1].cpu, x[2].cpu, out.cpu);
    EXPECT_TRUE(matches(out, 0)) << "where " << dtype;
    if (dtype == DType::kBool) continue;
    double lo = is_floating(dtype) ? -1.5 : 3, hi = is_floating(dtype) ? 2 : 20;
    Both clipped = poisoned_both({37, 53}, dtype);
    kernels::clip.get(kGpu)(x[0].gpu, lo, hi, clipped.gpu);
    kernels::clip.get(kHost)(x[0].cpu, lo, hi, clipped.cpu);
    EXPECT_TRUE(matches(clipped, 0)) << "clip " << dtype;
  }
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (int a = 0; a <= static_cast<int>(kernels::Activation::kSoftplus); ++a) {
      auto act = static_cast<kernels::Activation>(a);
      std::vector<Both> x = variants(dtype, 30 + a);
      for (size_t v = 0; v < x.size(); ++v) {
        Both y = poisoned_both({37, 53}, dtype), dx = poisoned_both({37, 53}, dtype);
        kernels::activation.get(kGpu)(act, 0.2, x[v].gpu, y.gpu);
        kernels::activation.get(kHost)(act, 0.2, x[v].cpu, y.cpu);
        EXPECT_TRUE(matches(y, ulps(dtype), 1e-37)) << "activation " << a;
        const Both& dy = x[(v + 1) % x.size()];
        kernels::activation_grad.get(kGpu)(act, 0.2, x[v].gpu, dy.gpu, dx.gpu);
        kernels::activation_grad.get(kHost)(act, 0.2, x[v].cpu, dy.cpu, dx.cpu);
        // GELU's derivative, Φ(x) + x·φ(x), cancels near x = -0.75: the devices' erfc and
        // exp (a few ulps apart) then differ by ulps of the terms, |dy| at most.
        double terms = act == kernels::Activation::kGelu ? testing::max_abs(dy.cpu) : 1e-37;
        EXPECT_TRUE(matches(dx, ulps(dtype, 8), ulps(dtype, 8) * terms)) << "activation_grad " << a;
      }
      if (!kernels::activation_uses_output(act)) continue;
      // The dense layer's fused backward: dz and the bias gradient (a column sum).
      Both y = random_both({300, 70}, dtype, 40 + a), dy = random_both({300, 70}, dtype, 50 + a);
      Both dz = poisoned_both({300, 70}, dtype), db = poisoned_both({70}, dtype);
      kernels::bias_activation_grad.get(kGpu)(act, 0.2, y.gpu, dy.gpu, dz.gpu, db.gpu);
      kernels::bias_activation_grad.get(kHost)(act, 0.2, y.cpu, dy.cpu, dz.cpu, db.cpu);
      EXPECT_TRUE(matches(dz, ulps(dtype, 8), 1e-37)) << "bias_activation_grad " << a;
      // Column sums in two orders differ by ulps of the sum of magnitudes, which n·max|dz|
      // bounds; a wrong reduction (a lost row) would miss by about |dz|.
      double magnitudes = 300 * testing::max_abs(dz.cpu);
      EXPECT_TRUE(matches(db, ulps(dtype, 64), ulps(dtype, 1) * magnitudes))
          << "bias gradient " << a;
    }
  }
}

TEST_F(CudaTest, ReductionsOfEveryShapeKind) {
  // inner == 1 (rows), inner > 1 (columns), one long reduction split into chunks, many
  // short ones, an empty axis.
  const std::array<int64_t, 3> shapes[] = {{64, 1000, 1}, {3, 777, 45},  {1, 3000000, 1},
                                           {1, 50000, 3}, {20000, 3, 2}, {4, 0, 5}};
  for (const auto& s : shapes) {
    Shape shape{s[0], s[1], s[2]}, out_shape{s[0], s[2]};
    for (DType dtype : kNumeric) {
      Both x = random_both(shape, dtype, 60, dtype != DType::kBool && s[1] < 100000);
      using kernels::ReduceOp;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin,
                          ReduceOp::kAny, ReduceOp::kAll}) {
        bool logical = op == ReduceOp::kAny || op == ReduceOp::kAll;
        if (logical != (dtype == DType::kBool)) continue;
        Both out = poisoned_both(out_shape, dtype);
        kernels::reduce.get(kGpu)(op, x.gpu, out.gpu);
        kernels::reduce.get(kHost)(op, x.cpu, out.cpu);
        bool sum = op == ReduceOp::kSum || op == ReduceOp::kMean;
        // Sums accumulate in double on both devices, in different orders.
        EXPECT_TRUE(matches(out, sum ? ulps(dtype, 2) : 0, sum ? 1e-9 : 0))
            << "op " << static_cast<int>(op) << " " << dtype << " " << shape;
      }
      if (dtype == DType::kBool || s[1] == 0) continue;
      for (auto op : {kernels::ArgReduceOp::kArgMax, kernels::ArgReduceOp::kArgMin}) {
        Both out = poisoned_both(out_shape, DType::kInt64);
        kernels::arg_reduce.get(kGpu)(op, x.gpu, out.gpu);
        kernels::arg_reduce.get(kHost)(op, x.cpu, out.cpu);
        EXPECT_TRUE(matches(out, 0)) << "argmax/argmin " << dtype << " " << shape;
      }
    }
  }
}

TEST_F(CudaTest, GatherScatterOneHotAndIndexChecks) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                      DType::kBFloat16}) {
    Both params = random_both({3, 500, 7}, dtype, 70);
    for (DType index_dtype : {DType::kInt32, DType::kInt64}) {
      Tensor ids = cast(floor(random_uniform({2000}, 0, 500, DType::kFloat64)), index_dtype);
      Both idx = testing::both(ids);
      Both out = poisoned_both({3, 2000, 7}, dtype);
      kernels::gather.get(kGpu)(params.gpu, idx.gpu, out.gpu);
      kernels::gather.get(kHost)(params.cpu, idx.cpu, out.cpu);
      EXPECT_TRUE(matches(out, 0)) << "gather " << dtype;
      if (dtype == DType::kBFloat16) continue;
      // Repeated rows accumulate; float sums in another order round differently.
      Both target = random_both({3, 500, 7}, dtype, 71);
      Both updates = random_both({3, 2000, 7}, dtype, 72);
      kernels::scatter_add.get(kGpu)(idx.gpu, updates.gpu, target.gpu);
      kernels::scatter_add.get(kHost)(idx.cpu, updates.cpu, target.cpu);
      EXPECT_TRUE(matches(target, ulps(dtype, 64), 1e-5)) << "scatter_add " << dtype;
      Both hot = poisoned_both({2000, 500}, dtype);
      kernels::one_hot.get(kGpu)(idx.gpu, 2, -1, hot.gpu);
      kernels::one_hot.get(kHost)(idx.cpu, 2, -1, hot.cpu);
      EXPECT_TRUE(matches(hot, 0)) << "one_hot " << dtype;
    }
  }
  Both ids = testing::both(cast(Tensor::from_vector<double>({3, 9, -1, 4, 12, 0}), DType::kInt64));
  EXPECT_EQ(kernels::find_bad_index.get(kGpu)(ids.gpu, 10), 2);
  EXPECT_EQ(kernels::find_bad_index.get(kGpu)(ids.gpu, 13), 2);
  EXPECT_EQ(kernels::find_bad_index.get(kGpu)(ids.gpu.slice(0, 3, 6), 13), -1);
  EXPECT_EQ(kernels::find_bad_index.get(kGpu)(ids.gpu.slice(0, 3, 6), 10), 1);
}

TEST_F(CudaTest, RandomStreamsEqualTheCpuStreams) {
  using Dist = kernels::RandomDistribution;
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (int64_t n : {1, 7, 100003}) {
      Generator gen(11, 3);
      gen.reserve(1000);
      PhiloxKey key = gen.reserve(0);
      for (Dist dist : {Dist::kUniform, Dist::kNormal, Dist::kTruncatedNormal}) {
        Both out = poisoned_both({n}, dtype);
        kernels::random.get(kGpu)(dist, 0.5, 2, key, out.gpu);
        kernels::random.get(kHost)(dist, 0.5, 2, key, out.cpu);
        // Uniform draws are the same bits; normals go through the devices' log/cos/sin
        // (within an ulp or two of each other in double), so their error scales with the
        // standard deviation (2): a draw near 0 = 0.5 + 2z cancels.
        double tolerance = dist == Dist::kUniform ? 0 : 1e-13;
        if (dtype == DType::kFloat32 && dist != Dist::kUniform) tolerance = ulps(dtype, 2);
        EXPECT_TRUE(matches(out, tolerance, 2 * tolerance))
            << dtype << " n=" << n << " dist " << static_cast<int>(dist);
      }
      Both mask = poisoned_both({n}, dtype);
      kernels::dropout_mask.get(kGpu)(0.25, key, mask.gpu);
      kernels::dropout_mask.get(kHost)(0.25, key, mask.cpu);
      EXPECT_TRUE(matches(mask, 0)) << "dropout " << dtype;
    }
  }
}

}  // namespace
}  // namespace cadre
