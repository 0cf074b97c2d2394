// Forward values of the ops, and the errors they give for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"

namespace cadre {
namespace {

using V = std::vector<float>;

Tensor f32(V values, Shape shape) { return Tensor::from_vector(values, shape); }

void expect_close(const Tensor& a, const Tensor& b, double tolerance) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], y[i], tolerance * std::max(1.0, std::abs(y[i]))) << "element " << i;
  }
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no InvalidArgumentError)";
}

TEST(OpsTest, ElementwiseWithBroadcasting) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({10, 20, 30}, {3});
  EXPECT_EQ((a + b).to_vector<float>(), (V{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a * f32({2, 3}, {2, 1})).to_vector<float>(), (V{2, 4, 6, 12, 15, 18}));
  EXPECT_EQ((a - 1.0).to_vector<float>(), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((12.0 / a).to_vector<float>(), (V{12, 6, 4, 3, 2.4f, 2}));
  EXPECT_EQ(maximum(a, f32({3}, {})).to_vector<float>(), (V{3, 3, 3, 4, 5, 6}));
  EXPECT_EQ(greater(a, f32({3}, {})).to_vector<int>(), (std::vector<int>{0, 0, 0, 1, 1, 1}));
  // A transposed (strided) operand.
  EXPECT_EQ((a.t() + f32({0, 100}, {2})).to_vector<float>(), (V{1, 104, 2, 105, 3, 106}));
  EXPECT_TRUE(std::isnan(maximum(f32({NAN}, {1}), f32({1}, {1})).item<float>()));
}

TEST(OpsTest, IntegerArithmeticAndFloorSemantics) {
  Tensor a = Tensor::from_vector<int32_t>({7, -7, 7, -7});
  Tensor b = Tensor::from_vector<int32_t>({2, 2, -2, -2});
  EXPECT_EQ(floor_div(a, b).to_vector<int>(), (std::vector<int>{3, -4, -4, 3}));
  EXPECT_EQ(mod(a, b).to_vector<int>(), (std::vector<int>{1, 1, -1, -1}));
  EXPECT_EQ(mod(f32({7.5, -7.5}, {2}), f32({2, 2}, {2})).to_vector<float>(), (V{1.5, 0.5}));
  EXPECT_EQ((a * b).to_vector<int>(), (std::vector<int>{14, -14, -14, 14}));
  EXPECT_EQ(abs(b).to_vector<int>(), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(round(f32({0.5, 1.5, 2.5, -0.5}, {4})).to_vector<float>(), (V{0, 2, 2, -0}));
}

TEST(OpsTest, UnaryAndActivations) {
  Tensor x = f32({-2, -0.5, 0, 1.5}, {4});
  EXPECT_EQ(relu(x).to_vector<float>(), (V{0, 0, 0, 1.5}));
  EXPECT_EQ(leaky_relu(x, 0.1).to_vector<float>(), (V{-0.2f, -0.05f, 0, 1.5}));
  expect_close(sigmoid(x), f32({0.11920292f, 0.37754067f, 0.5f, 0.81757448f}, {4}), 1e-6);
  expect_close(gelu(x), f32({-0.04550026f, -0.15426877f, 0.f, 1.39978922f}, {4}), 1e-6);
  expect_close(softplus(x), f32({0.12692801f, 0.47407698f, 0.69314718f, 1.70141328f}, {4}), 1e-6);
  expect_close(elu(x, 1.0), f32({-0.86466472f, -0.39346934f, 0, 1.5f}, {4}), 1e-6);
  EXPECT_EQ(is_finite(f32({1, INFINITY, NAN}, {3})).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_THROW(exp(Tensor::from_vector<int32_t>({1})), InvalidArgumentError);
  EXPECT_EQ(clip_by_value(x, -1, 1).to_vector<float>(), (V{-1, -0.5, 0, 1}));
}

TEST(OpsTest, Reductions) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(x).item<float>(), 21);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (V{5, 7, 9}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, {-1}).to_vector<float>(), (V{2, 5}));
  EXPECT_EQ(max(x, {0}).to_vector<float>(), (V{4, 5, 6}));
  EXPECT_EQ(min(x).item<float>(), 1);
  EXPECT_EQ(argmax(f32({1, 9, 9, 4, 0, 2}, {2, 3}), 1).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  Tensor cube = f32({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  EXPECT_EQ(sum(cube, {0, 2}).to_vector<float>(), (V{10, 18}));  // non-adjacent axes
  EXPECT_EQ(sum(Tensor::from_vector<int32_t>({1, 2, 3})).item<int>(), 6);
  EXPECT_EQ(sum(Tensor::zeros(Shape{0, 3}), {0}).to_vector<float>(), (V{0, 0, 0}));
  EXPECT_TRUE(std::isnan(mean(Tensor::zeros(Shape{0})).item<float>()));
  EXPECT_TRUE(any(greater(x, f32({5}, {}))).item<bool>());
  EXPECT_FALSE(all(greater(x, f32({5}, {}))).item<bool>());
  EXPECT_THROW(max(Tensor::zeros(Shape{0})), InvalidArgumentError);
  // A long sum in float32 stays accurate (chunked, lane-wise accumulation).
  EXPECT_NEAR(sum(Tensor::full(Shape{1000000}, 0.1)).item<float>(), 100000.0, 0.02);
}

TEST(OpsTest, MatmulValues) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (V{4, 5, 10, 11}));
  EXPECT_EQ(matmul(a, a, false, true).to_vector<float>(), (V{14, 32, 32, 77}));
  EXPECT_EQ(matmul(a, a, true, false).shape(), (Shape{3, 3}));
  EXPECT_EQ(matmul(a.t(), a.t(), true, false).to_vector<float>(), (V{14, 32, 32, 77}));
  Tensor batch = stack({a, a * 2.0});
  EXPECT_EQ(matmul(batch, b).to_vector<float>(), (V{4, 5, 10, 11, 8, 10, 20, 22}));
  // float32 (oneDNN) against float64 (OpenBLAS) on a larger random product.
  Tensor x = random_normal({37, 61}), y = random_normal({61, 29});
  expect_close(matmul(x, y),
               matmul(x.cast(DType::kFloat64), y.cast(DType::kFloat64)).cast(DType::kFloat32),
               1e-4);
}

// A slice of a matrix's columns (rows further apart than their length) is read in place
// by the CPU kernels: the same bits as its contiguous copy, either operand, read
// transposed or not, float32 and float64.
TEST(OpsTest, MatmulReadsASliceOfColumnsAsItsCopy) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    Tensor x = random_normal({19, 40}).cast(dtype), y = random_normal({40, 23}).cast(dtype);
    Tensor xs = x.slice(1, 5, 30);  // [19, 25], rows 40 apart
    Tensor ys = y.slice(1, 2, 21);  // [40, 19]
    ASSERT_FALSE(xs.is_contiguous());
    auto same = [](const Tensor& got, const Tensor& want) {
      EXPECT_EQ(got.cast(DType::kFloat64).to_vector<double>(),
                want.cast(DType::kFloat64).to_vector<double>());
    };
    same(matmul(xs, ys.slice(0, 0, 25)), matmul(contiguous(xs), contiguous(ys.slice(0, 0, 25))));
    same(matmul(xs, xs, true, false), matmul(contiguous(xs), contiguous(xs), true, false));
    same(matmul(ys, ys, false, true), matmul(contiguous(ys), contiguous(ys), false, true));
  }
}

TEST(OpsTest, LinearFusesBiasAndActivation) {
  Tensor x = random_normal({8, 5}), w = random_normal({5, 3}), b = random_normal({3});
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kSigmoid,
                         Activation::kTanh, Activation::kElu, Activation::kGelu}) {
    expect_close(linear(x, w, b, act, 1.0), activate(matmul(x, w) + b, act, 1.0), 1e-5);
  }
  EXPECT_EQ(linear(random_normal({2, 4, 5}), w, b).shape(), (Shape{2, 4, 3}));
}

TEST(OpsTest, SoftmaxAndCrossEntropy) {
  Tensor logits = f32({1, 2, 3, 1, 1, 1}, {2, 3});
  expect_close(softmax(logits),
               f32({0.09003057f, 0.24472847f, 0.66524096f, 1 / 3.f, 1 / 3.f, 1 / 3.f}, {2, 3}),
               1e-6);
  expect_close(exp(log_softmax(logits)), softmax(logits), 1e-6);
  Tensor labels = Tensor::from_vector<int64_t>({2, 0});
  expect_close(sparse_softmax_cross_entropy_with_logits(labels, logits),
               f32({0.40760596f, 1.09861229f}, {2}), 1e-6);
  // Stable for huge logits.
  Tensor big = f32({1000, 0}, {1, 2});
  EXPECT_NEAR(sparse_softmax_cross_entropy_with_logits(Tensor::from_vector<int32_t>({1}), big)
                  .item<float>(),
              1000, 1e-3);
  std::string message = error_of([&] {
    sparse_softmax_cross_entropy_with_logits(Tensor::from_vector<int64_t>({1, 12}), logits);
  });
  EXPECT_NE(message.find("labels[1] = 12"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 3)"), std::string::npos) << message;
}

TEST(OpsTest, Conv2DFloat32MatchesFloat64Reference) {
  struct Case {
    Shape x, w;
    std::array<int64_t, 2> strides, dilations;
    Padding padding;
  };
  for (const Case& c :
       std::vector<Case>{{{2, 9, 9, 3}, {3, 3, 3, 8}, {1, 1}, {1, 1}, Padding::kValid},
                         {{1, 8, 7, 4}, {3, 3, 4, 5}, {2, 2}, {1, 1}, Padding::kSame},
                         {{1, 9, 9, 2}, {3, 3, 2, 3}, {1, 1}, {2, 2}, Padding::kSame},
                         {{3, 28, 28, 1}, {3, 3, 1, 32}, {1, 1}, {1, 1}, Padding::kValid}}) {
    Tensor x = random_normal(c.x), w = random_normal(c.w), b = random_normal({c.w[3]});
    for (Activation act : {Activation::kNone, Activation::kRelu}) {
      Tensor got = conv2d(x, w, b, c.strides, c.padding, c.dilations, act);
      Tensor want = conv2d(x.cast(DType::kFloat64), w.cast(DType::kFloat64),
                           b.cast(DType::kFloat64), c.strides, c.padding, c.dilations, act);
      expect_close(got, want.cast(DType::kFloat32), 1e-4);
    }
  }
  std::string message = error_of([] {
    conv2d(Tensor::zeros(Shape{1, 5, 5, 3}), Tensor::zeros(Shape{3, 3, 2, 4}), Tensor());
  });
  EXPECT_NE(message.find("3 channels"), std::string::npos) << message;
}

TEST(OpsTest, PoolingValues) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 4, 4, 1});
  EXPECT_EQ(max_pool2d(x, {2, 2}, {2, 2}).to_vector<float>(), (V{6, 8, 14, 16}));
  EXPECT_EQ(avg_pool2d(x, {2, 2}, {2, 2}).to_vector<float>(), (V{3.5, 5.5, 11.5, 13.5}));
  // SAME padding averages over the elements inside the image only.
  EXPECT_EQ(avg_pool2d(x, {3, 3}, {2, 2}, Padding::kSame).to_vector<float>(),
            (V{6, 7.5, 12, 13.5}));
  EXPECT_EQ(max_pool2d(x, {3, 3}, {2, 2}, Padding::kSame).shape(), (Shape{1, 2, 2, 1}));
  // Ties go to the first tap (its gradient too); a NaN wins only as the first tap.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor odd = f32({5, 5, nan, 1, 5, 5, 3, 2}, {1, 2, 2, 2});
  std::vector<float> pooled = max_pool2d(odd, {2, 2}, {2, 2}).to_vector<float>();
  EXPECT_EQ(pooled[0], 5);
  EXPECT_EQ(pooled[1], 5);
  Tensor later_nan = f32({1, nan, 3, 2}, {1, 2, 2, 1});
  EXPECT_EQ(max_pool2d(later_nan, {2, 2}, {2, 2}).to_vector<float>(), (V{3}));
  EXPECT_TRUE(std::isnan(
      max_pool2d(f32({nan, 1, 3, 2}, {1, 2, 2, 1}), {2, 2}, {2, 2}).to_vector<float>()[0]));
  Tensor ties = f32({5, 5, 5, 5}, {1, 2, 2, 1});
  GradientTape tape;
  tape.watch(ties);
  Tensor grad = tape.gradient(sum(max_pool2d(ties, {2, 2}, {2, 2})), ties).to_dense();
  EXPECT_EQ(grad.to_vector<float>(), (V{1, 0, 0, 0}));
}

TEST(OpsTest, BatchNormStatistics) {
  Tensor x = f32({1, 10, 3, 20, 5, 30}, {3, 2});
  BatchNormResult r = batch_norm_training(x, Tensor::ones(Shape{2}), Tensor::zeros(Shape{2}), 0);
  EXPECT_EQ(r.batch_mean.to_vector<float>(), (V{3, 20}));
  expect_close(r.batch_variance, f32({8.f / 3, 200.f / 3}, {2}), 1e-6);
  expect_close(mean(r.y, {0}), f32({0, 0}, {2}), 1e-6);
  expect_close(batch_norm_inference(x, Tensor::ones(Shape{2}), Tensor::zeros(Shape{2}),
                                    r.batch_mean, r.batch_variance, 0),
               r.y, 1e-5);
}

TEST(OpsTest, GatherScatterOneHot) {
  Tensor params = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor ids = Tensor::from_vector<int32_t>({2, 0, 2});
  EXPECT_EQ(gather(params, ids).to_vector<float>(), (V{20, 21, 0, 1, 20, 21}));
  EXPECT_EQ(gather(params, Tensor::from_vector<int64_t>({1}), 1).to_vector<float>(),
            (V{1, 11, 21}));
  EXPECT_EQ(scatter_add(Tensor::zeros(Shape{3, 2}), ids, f32({1, 1, 2, 2, 3, 3}, {3, 2}))
                .to_vector<float>(),
            (V{2, 2, 0, 0, 4, 4}));
  EXPECT_EQ(one_hot(Tensor::from_vector<int64_t>({1, 3, -1}), 3).to_vector<float>(),
            (V{0, 1, 0, 0, 0, 0, 0, 0, 0}));
  std::string message = error_of([&] { gather(params, Tensor::from_vector<int64_t>({0, 3})); });
  EXPECT_NE(message.find("indices[1] = 3"), std::string::npos) << message;
}

TEST(OpsTest, ConcatSplitStack) {
  Tensor a = f32({1, 2}, {1, 2}), b = f32({3, 4, 5, 6}, {2, 2});
  EXPECT_EQ(concat({a, b}, 0).to_vector<float>(), (V{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(concat({b, b}, 1).shape(), (Shape{2, 4}));
  EXPECT_EQ(stack({a, a}, -1).shape(), (Shape{1, 2, 2}));
  auto parts = split(b, {1, 1}, 0);
  EXPECT_EQ(parts[1].to_vector<float>(), (V{5, 6}));
  EXPECT_THROW(concat({a, f32({1, 2, 3}, {1, 3})}, 0), InvalidArgumentError);
  EXPECT_THROW(split(b, {1, 2}, 0), InvalidArgumentError);
  EXPECT_EQ(range(0, 5, 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
}

TEST(OpsTest, BadInputNamesOpShapesAndDtypes) {
  std::string message = error_of([] {
    matmul(Tensor::zeros(Shape{2, 3}), Tensor::zeros(Shape{4, 5}));
  });
  EXPECT_NE(message.find("matmul"), std::string::npos);
  EXPECT_NE(message.find("[2, 3]"), std::string::npos);
  EXPECT_NE(message.find("[4, 5]"), std::string::npos) << message;
  message =
      error_of([] { add(Tensor::zeros(Shape{2}), Tensor::zeros(Shape{2}, DType::kFloat64)); });
  EXPECT_NE(message.find("add"), std::string::npos);
  EXPECT_NE(message.find("float32"), std::string::npos);
  EXPECT_NE(message.find("float64"), std::string::npos) << message;
  message = error_of([] { mul(Tensor::zeros(Shape{2, 3}), Tensor::zeros(Shape{4, 3})); });
  EXPECT_NE(message.find("mul"), std::string::npos);
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  message = error_of([] {
    linear(Tensor::zeros(Shape{2, 3}), Tensor::zeros(Shape{4, 5}), Tensor());
  });
  EXPECT_NE(message.find("[4, 5]"), std::string::npos) << message;
  EXPECT_THROW(sum(Tensor::zeros(Shape{2}), {3}), InvalidArgumentError);
  EXPECT_THROW(Tensor::zeros(Shape{2, 3}).transpose({0, 0}), InvalidArgumentError);
  EXPECT_EQ(parse_padding("same"), Padding::kSame);
  EXPECT_EQ(parse_padding("VALID"), Padding::kValid);
  message = error_of([] { parse_padding("full"); });
  EXPECT_NE(message.find("full"), std::string::npos) << message;
}

TEST(OpsTest, FloatToIntegerCastsTruncateSaturateAndTakeNanAsZero) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::from_vector<double>({std::nan(""), inf, -inf, 3.9, -3.9, 1e20, 300, -5});
  EXPECT_EQ(cast(x, DType::kInt32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, 3, -3, INT32_MAX, 300, -5}));
  EXPECT_EQ(cast(cast(x, DType::kFloat32), DType::kInt64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, 3, -3, INT64_MAX, 300, -5}));
  EXPECT_EQ(cast(x, DType::kUInt8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 255, 0, 3, 0, 255, 255, 0}));
}

TEST(OpsTest, FullLikeTakesShapeDtypeAndDevice) {
  Tensor x = Tensor::zeros(Shape{2, 3}, DType::kFloat64);
  Tensor y = full_like(x, 2.5);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(6, 2.5));
}

}  // namespace
}  // namespace cadre
