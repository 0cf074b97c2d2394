// Every differentiable op's gradient against central finite differences in float64, on
// random inputs, broadcasting edge cases included (convolution: conv_grad_test.cc).
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>

#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/nn.h"
#include "tests/support/grad_check.h"

namespace cadre {
namespace {

using testing::expect_gradients_match;
using testing::random_tensor;
using Inputs = std::vector<Tensor>;

struct ShapePair {
  Shape a, b;
};

const std::vector<ShapePair> kBroadcastCases = {
    {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}},    {{}, {2, 3}},
    {{2, 3}, {}},     {{1}, {5}},    {{}, {}},         {{4, 1, 3}, {1, 2, 1}},
};

void check_binary(Tensor (*op)(const Tensor&, const Tensor&), double lo = -1, double hi = 1) {
  for (const auto& c : kBroadcastCases) {
    SCOPED_TRACE(c.a.to_string() + " with " + c.b.to_string());
    expect_gradients_match([op](const Inputs& x) { return op(x[0], x[1]); },
                           {random_tensor(c.a, 1, lo, hi), random_tensor(c.b, 2, lo, hi)});
  }
}

TEST(GradTest, Add) { check_binary(add); }
TEST(GradTest, Sub) { check_binary(sub); }
TEST(GradTest, Mul) { check_binary(mul); }
TEST(GradTest, Div) { check_binary(div, 0.5, 2.0); }
TEST(GradTest, Pow) { check_binary(pow, 0.5, 2.0); }
TEST(GradTest, Maximum) { check_binary(maximum); }
TEST(GradTest, Minimum) { check_binary(minimum); }
TEST(GradTest, SquaredDifference) { check_binary(squared_difference); }

TEST(GradTest, Operators) {
  expect_gradients_match(
      [](const Inputs& x) { return (x[0] * 2.0 - x[1]) / (x[1] + 3.0) + (1.0 - x[0]) * -x[1]; },
      {random_tensor({2, 3}, 3), random_tensor({3}, 4)});
}

void check_unary(Tensor (*op)(const Tensor&), double lo = -1, double hi = 1) {
  for (const Shape& s : {Shape{}, Shape{7}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(s.to_string());
    expect_gradients_match([op](const Inputs& x) { return op(x[0]); },
                           {random_tensor(s, 5, lo, hi)});
  }
}

TEST(GradTest, Neg) { check_unary(neg); }
TEST(GradTest, Abs) { check_unary(abs); }
TEST(GradTest, Square) { check_unary(square); }
TEST(GradTest, Sqrt) { check_unary(sqrt, 0.5, 2); }
TEST(GradTest, Rsqrt) { check_unary(rsqrt, 0.5, 2); }
TEST(GradTest, Reciprocal) { check_unary(reciprocal, 0.5, 2); }
TEST(GradTest, Exp) { check_unary(exp); }
TEST(GradTest, Expm1) { check_unary(expm1); }
TEST(GradTest, Log) { check_unary(log, 0.5, 2); }
TEST(GradTest, Log1p) { check_unary(log1p, -0.5, 2); }
TEST(GradTest, Sin) { check_unary(sin); }
TEST(GradTest, Cos) { check_unary(cos); }
TEST(GradTest, Tan) { check_unary(tan); }
TEST(GradTest, Erf) { check_unary(erf); }
TEST(GradTest, Relu) { check_unary(relu); }
TEST(GradTest, Sigmoid) { check_unary(sigmoid, -3, 3); }
TEST(GradTest, Tanh) { check_unary(tanh, -2, 2); }
TEST(GradTest, Gelu) { check_unary(gelu, -3, 3); }
TEST(GradTest, Softplus) { check_unary(softplus, -3, 3); }
TEST(GradTest, LeakyRelu) {
  expect_gradients_match([](const Inputs& x) { return leaky_relu(x[0], 0.1); },
                         {random_tensor({3, 5}, 6)});
}
TEST(GradTest, Elu) {
  expect_gradients_match([](const Inputs& x) { return elu(x[0], 0.7); },
                         {random_tensor({3, 5}, 6)});
}

TEST(GradTest, Where) {
  Tensor cond = greater(random_tensor({3, 4}, 11), Tensor::zeros(Shape{}, DType::kFloat64));
  expect_gradients_match([cond](const Inputs& x) { return where(cond, x[0], x[1]); },
                         {random_tensor({3, 4}, 12), random_tensor({4}, 13)});
}

TEST(GradTest, ClipByValue) {
  expect_gradients_match([](const Inputs& x) { return clip_by_value(x[0], -0.5, 0.4); },
                         {random_tensor({4, 5}, 14)});
}

TEST(GradTest, Sum) {
  Tensor x = random_tensor({2, 3, 4}, 20);
  for (auto axes : std::vector<std::vector<int>>{{}, {0}, {1}, {2}, {0, 2}, {-1, 0}, {0, 1, 2}}) {
    for (bool keep : {false, true}) {
      expect_gradients_match([axes, keep](const Inputs& v) { return sum(v[0], axes, keep); }, {x});
    }
  }
}

TEST(GradTest, Mean) {
  Tensor x = random_tensor({2, 3, 4}, 21);
  for (auto axes : std::vector<std::vector<int>>{{}, {1}, {0, 2}}) {
    expect_gradients_match([axes](const Inputs& v) { return mean(v[0], axes, true); }, {x});
  }
}

TEST(GradTest, MaxMin) {
  Tensor x = random_tensor({3, 4, 5}, 22);
  for (auto axes : std::vector<std::vector<int>>{{}, {0}, {2}, {0, 2}}) {
    expect_gradients_match([axes](const Inputs& v) { return max(v[0], axes); }, {x});
    expect_gradients_match([axes](const Inputs& v) { return min(v[0], axes, true); }, {x});
  }
}

TEST(GradTest, ShapeOps) {
  Tensor x = random_tensor({2, 3, 4}, 30);
  expect_gradients_match([](const Inputs& v) { return v[0].reshape({4, -1}); }, {x});
  expect_gradients_match([](const Inputs& v) { return v[0].transpose({2, 0, 1}); }, {x});
  expect_gradients_match([](const Inputs& v) { return v[0].slice(2, 1, 4, 2); }, {x});
  expect_gradients_match([](const Inputs& v) { return v[0].slice(0, -1, 2); }, {x});
  expect_gradients_match([](const Inputs& v) { return v[0].expand_dims(1).squeeze(1); }, {x});
  expect_gradients_match([](const Inputs& v) { return v[0].broadcast_to(Shape{5, 2, 3, 4}); }, {x});
  expect_gradients_match(
      [](const Inputs& v) {
        return v[0].transpose({1, 0, 2}).contiguous();
      },
      {x});
  expect_gradients_match([](const Inputs& v) { return flatten(v[0]); }, {x});
}

TEST(GradTest, ConcatStackSplit) {
  Inputs xs{random_tensor({2, 3}, 31), random_tensor({2, 5}, 32), random_tensor({2, 1}, 33)};
  expect_gradients_match([](const Inputs& v) { return concat(v, 1); }, xs);
  Inputs ys{random_tensor({2, 3}, 34), random_tensor({2, 3}, 35)};
  expect_gradients_match([](const Inputs& v) { return stack(v, 1); }, ys);
  expect_gradients_match(
      [](const Inputs& v) {
        auto parts = split(v[0], {1, 3, 1}, 1);
        return add(mul(parts[0], parts[2]), sum(parts[1], {1}, true));
      },
      {random_tensor({3, 5}, 36)});
}

TEST(GradTest, Matmul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transpose_a=" << ta << " transpose_b=" << tb);
      Tensor a = random_tensor(ta ? Shape{4, 3} : Shape{3, 4}, 40);
      Tensor b = random_tensor(tb ? Shape{5, 4} : Shape{4, 5}, 41);
      expect_gradients_match([ta, tb](const Inputs& v) { return matmul(v[0], v[1], ta, tb); },
                             {a, b});
    }
  }
}

TEST(GradTest, MatmulBatchedAndBroadcast) {
  expect_gradients_match([](const Inputs& v) { return matmul(v[0], v[1]); },
                         {random_tensor({2, 3, 4}, 42), random_tensor({2, 4, 2}, 43)});
  expect_gradients_match([](const Inputs& v) { return matmul(v[0], v[1], false, true); },
                         {random_tensor({2, 3, 4}, 44), random_tensor({5, 4}, 45)});
  expect_gradients_match([](const Inputs& v) { return matmul(v[0], v[1]); },
                         {random_tensor({3, 4}, 46), random_tensor({2, 1, 4, 2}, 47)});
  // A transposed view as an operand.
  expect_gradients_match([](const Inputs& v) { return matmul(v[0].t(), v[1]); },
                         {random_tensor({4, 3}, 48), random_tensor({4, 2}, 49)});
}

TEST(GradTest, Linear) {
  for (Activation act :
       {Activation::kNone, Activation::kRelu, Activation::kSigmoid, Activation::kTanh,
        Activation::kGelu, Activation::kElu, Activation::kLeakyRelu, Activation::kSoftplus}) {
    SCOPED_TRACE(static_cast<int>(act));
    expect_gradients_match(
        [act](const Inputs& v) { return linear(v[0], v[1], v[2], act, 0.3); },
        {random_tensor({5, 4}, 50), random_tensor({4, 3}, 51), random_tensor({3}, 52)});
  }
  expect_gradients_match([](const Inputs& v) { return linear(v[0], v[1], Tensor()); },
                         {random_tensor({2, 3, 4}, 53), random_tensor({4, 3}, 54)});
}

TEST(GradTest, Softmax) {
  Tensor x = random_tensor({3, 5}, 60, -2, 2);
  expect_gradients_match([](const Inputs& v) { return softmax(v[0]); }, {x});
  expect_gradients_match([](const Inputs& v) { return log_softmax(v[0]); }, {x});
  expect_gradients_match([](const Inputs& v) { return softmax(v[0], 0); }, {x});
  expect_gradients_match([](const Inputs& v) { return log_softmax(v[0], 0); }, {x});
}

TEST(GradTest, CrossEntropies) {
  Tensor logits = random_tensor({4, 6}, 61, -3, 3);
  Tensor labels = Tensor::from_vector<int64_t>({0, 5, 2, 2});
  expect_gradients_match(
      [labels](const Inputs& v) { return sparse_softmax_cross_entropy_with_logits(labels, v[0]); },
      {logits});
  Tensor labels32 = Tensor::from_vector<int32_t>({1, 1, 3, 0});
  expect_gradients_match(
      [labels32](const Inputs& v) {
        return sparse_softmax_cross_entropy_with_logits(labels32, v[0]);
      },
      {logits});
  Tensor dist = softmax(random_tensor({4, 6}, 62));
  expect_gradients_match(
      [](const Inputs& v) { return softmax_cross_entropy_with_logits(v[0], v[1]); },
      {dist, logits});
  Tensor targets = random_tensor({4, 6}, 63, 0, 1);
  expect_gradients_match(
      [](const Inputs& v) { return sigmoid_cross_entropy_with_logits(v[0], v[1]); },
      {targets, logits});
}

TEST(GradTest, Pooling) {
  Tensor x = random_tensor({2, 5, 6, 3}, 80);
  for (Padding p : {Padding::kValid, Padding::kSame}) {
    expect_gradients_match(
        [p](const Inputs& v) {
          return max_pool2d(v[0], {2, 2}, {2, 2}, p);
        },
        {x});
    expect_gradients_match(
        [p](const Inputs& v) {
          return avg_pool2d(v[0], {3, 2}, {2, 1}, p);
        },
        {x});
  }
  // Windows that tile the image (strides equal to the window), with input rows and columns
  // that no window covers under VALID padding and partial windows under SAME.
  Tensor odd = random_tensor({2, 7, 8, 3}, 81);
  for (Padding p : {Padding::kValid, Padding::kSame}) {
    expect_gradients_match(
        [p](const Inputs& v) {
          return max_pool2d(v[0], {2, 3}, {2, 3}, p);
        },
        {odd});
    expect_gradients_match(
        [p](const Inputs& v) {
          return max_pool2d(v[0], {3, 3}, {1, 2}, p);
        },
        {x});
  }
}

// Random geometries through the float32 pooling loops (8-lane vectors where the channels
// allow, tiled windows) against the float64 ones checked above.
TEST(GradTest, PoolingFloat32MatchesFloat64OnRandomGeometries) {
  std::mt19937 rng(1126);
  auto pick = [&rng](std::vector<int64_t> from) { return from[rng() % from.size()]; };
  for (int i = 0; i < 40; ++i) {
    Shape shape{pick({1, 3}), pick({2, 5, 9}), pick({3, 8}), pick({1, 5, 8, 16, 24})};
    std::array<int64_t, 2> window{pick({1, 2, 3}), pick({1, 2, 3})};
    std::array<int64_t, 2> strides =
        pick({0, 1}) ? window : std::array<int64_t, 2>{pick({1, 2}), pick({1, 2})};
    Padding padding = pick({0, 1}) ? Padding::kSame : Padding::kValid;
    bool max = pick({0, 1});
    if (padding == Padding::kValid && (window[0] > shape[1] || window[1] > shape[2])) continue;
    SCOPED_TRACE(shape.to_string() + (max ? " max" : " avg") + " window " +
                 std::to_string(window[0]) + "x" + std::to_string(window[1]) + " strides " +
                 std::to_string(strides[0]) + "," + std::to_string(strides[1]) +
                 (padding == Padding::kSame ? " SAME" : " VALID"));
    auto run = [&](DType dtype) {
      Tensor x = random_tensor(shape, 90 + i).cast(dtype);
      GradientTape tape;
      tape.watch(x);
      Tensor y =
          max ? max_pool2d(x, window, strides, padding) : avg_pool2d(x, window, strides, padding);
      Tensor r = random_tensor(y.shape(), 91 + i, 0.5, 1.5).cast(dtype);
      Tensor dx = tape.gradient(sum(mul(y, r)), x).to_dense();
      return std::vector<std::vector<double>>{y.cast(DType::kFloat64).to_vector<double>(),
                                              dx.cast(DType::kFloat64).to_vector<double>()};
    };
    auto got = run(DType::kFloat32), want = run(DType::kFloat64);
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].size(), want[k].size());
      for (size_t e = 0; e < got[k].size(); ++e) {
        ASSERT_NEAR(got[k][e], want[k][e], 1e-5 * std::max(1.0, std::abs(want[k][e])))
            << (k == 0 ? "output" : "input gradient") << " element " << e;
      }
    }
  }
}

TEST(GradTest, BatchNorm) {
  Inputs in{random_tensor({4, 3, 5}, 90), random_tensor({5}, 91, 0.5, 1.5), random_tensor({5}, 92)};
  expect_gradients_match(
      [](const Inputs& v) { return batch_norm_training(v[0], v[1], v[2], 1e-3).y; }, in);
  Tensor mean = random_tensor({5}, 93), var = random_tensor({5}, 94, 0.5, 2);
  expect_gradients_match(
      [](const Inputs& v) { return batch_norm_inference(v[0], v[1], v[2], v[3], v[4], 1e-3); },
      {in[0], in[1], in[2], mean, var});
}

TEST(GradTest, Dropout) {
  expect_gradients_match(
      [](const Inputs& v) {
        Generator g(5, 1);
        return dropout(v[0], 0.4, &g);
      },
      {random_tensor({6, 7}, 95)});
}

TEST(GradTest, Gather) {
  Tensor params = random_tensor({5, 3}, 100);
  Tensor ids = Tensor::from_vector<int64_t>({4, 0, 4, 2}, Shape{2, 2});
  expect_gradients_match([ids](const Inputs& v) { return gather(v[0], ids, 0); }, {params});
  Tensor cols = Tensor::from_vector<int32_t>({2, 0, 2});
  expect_gradients_match([cols](const Inputs& v) { return gather(v[0], cols, 1); }, {params});
}

TEST(GradTest, ScatterAdd) {
  Tensor ids = Tensor::from_vector<int64_t>({1, 3, 1});
  expect_gradients_match([ids](const Inputs& v) { return scatter_add(v[0], ids, v[1]); },
                         {random_tensor({4, 2}, 101), random_tensor({3, 2}, 102)});
}

TEST(GradTest, Cast) {
  // float64 -> float32 -> float64 loses precision: check with a matching tolerance.
  expect_gradients_match(
      [](const Inputs& v) { return cast(square(cast(v[0], DType::kFloat32)), DType::kFloat64); },
      {random_tensor({3}, 103)}, {}, 1e-3, 1e-3);
}

}  // namespace
}  // namespace cadre
