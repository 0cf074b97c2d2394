#include <gtest/gtest.h>

#include <cmath>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"

namespace cadre {
namespace {

// Applies `steps` updates of `optimizer` to w (initially `init`) with gradients g_t = w_t
// (from loss sum(w^2)/2) and returns w.
std::vector<double> run(nn::Optimizer& optimizer, std::vector<double> init, int steps,
                        nn::VariableStore& store) {
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{static_cast<int64_t>(init.size())},
                                     nn::initializers::zeros(), DType::kFloat64);
  w.assign(Tensor::from_vector(init));
  for (int i = 0; i < steps; ++i) {
    GradientTape tape;
    Tensor loss = sum(square(w.read())) * 0.5;
    optimizer.minimize(tape, loss, {&w});
  }
  return w.tensor().to_vector<double>();
}

TEST(OptimizersTest, SgdWithMomentumFollowsKeras) {
  nn::VariableStore store;
  auto opt = nn::optimizers::sgd(0.1, 0.9);
  std::vector<double> w = run(*opt, {1.0, -2.0}, 3, store);
  // Keras: v = m v - lr g; w += v, with g = w.
  double x = 1.0, v = 0;
  for (int i = 0; i < 3; ++i) {
    v = 0.9 * v - 0.1 * x;
    x += v;
  }
  EXPECT_NEAR(w[0], x, 1e-12);
  EXPECT_NEAR(w[1], -2 * x, 1e-12);
  nn::VariableStoreScope scope(store);
  EXPECT_NE(store.find("w/SGD/momentum"), nullptr);
  EXPECT_EQ(opt->iterations(), 3);
}

TEST(OptimizersTest, NesterovMomentum) {
  nn::VariableStore store;
  auto opt = nn::optimizers::sgd(0.1, 0.5, /*nesterov=*/true);
  std::vector<double> w = run(*opt, {1.0}, 2, store);
  double x = 1.0, v = 0;
  for (int i = 0; i < 2; ++i) {
    double g = x;
    v = 0.5 * v - 0.1 * g;
    x += 0.5 * v - 0.1 * g;
  }
  EXPECT_NEAR(w[0], x, 1e-12);
}

TEST(OptimizersTest, AdamFollowsKeras) {
  nn::VariableStore store;
  auto opt = nn::optimizers::adam(0.01);
  std::vector<double> w = run(*opt, {0.5, -1.5}, 4, store);
  for (int k = 0; k < 2; ++k) {
    double x = k == 0 ? 0.5 : -1.5, m = 0, v = 0;
    for (int t = 1; t <= 4; ++t) {
      double g = x;
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      double lr = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      x -= lr * m / (std::sqrt(v) + 1e-7);
    }
    EXPECT_NEAR(w[k], x, 1e-12);
  }
  nn::VariableStoreScope scope(store);
  EXPECT_NE(store.find("w/Adam/m"), nullptr);
  EXPECT_NE(store.find("w/Adam/v"), nullptr);
  EXPECT_EQ(store.find("Adam/iterations")->tensor().item<int64_t>(), 4);
}

TEST(OptimizersTest, AdagradAndRmsProp) {
  nn::VariableStore s1, s2, s3;
  std::vector<double> a = run(*nn::optimizers::adagrad(0.1), {2.0}, 2, s1);
  double x = 2.0, acc = 0.1;
  for (int i = 0; i < 2; ++i) {
    acc += x * x;
    x -= 0.1 * x / (std::sqrt(acc) + 1e-7);
  }
  EXPECT_NEAR(a[0], x, 1e-12);
  std::vector<double> r = run(*nn::optimizers::rmsprop(0.01, 0.9, 0.5, 1e-7, true), {1.0}, 3, s2);
  x = 1.0;
  double ms = 0, mg = 0, mom = 0;
  for (int i = 0; i < 3; ++i) {
    double g = x;
    ms = 0.9 * ms + 0.1 * g * g;
    mg = 0.9 * mg + 0.1 * g;
    mom = 0.5 * mom + 0.01 * g / std::sqrt(ms - mg * mg + 1e-7);
    x -= mom;
  }
  EXPECT_NEAR(r[0], x, 1e-12);
  std::vector<double> plain = run(*nn::optimizers::rmsprop(0.01), {1.0}, 1, s3);
  EXPECT_NEAR(plain[0], 1.0 - 0.01 / std::sqrt(0.1 + 1e-7), 1e-12);
}

TEST(OptimizersTest, SparseUpdatesTouchOnlyTheirRows) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& table = nn::get_variable("t", Shape{4, 2}, nn::initializers::ones());
  auto step = [&](nn::Optimizer& opt) {
    GradientTape tape;
    Tensor rows = gather(table.read(), Tensor::from_vector<int64_t>({2, 0, 2}));
    opt.minimize(tape, sum(rows), {&table});
  };
  auto sgd = nn::optimizers::sgd(0.5);
  step(*sgd);
  EXPECT_EQ(table.tensor().to_vector<float>(), (std::vector<float>{0.5, 0.5, 1, 1, 0, 0, 1, 1}));
  auto adagrad = nn::optimizers::adagrad(0.1);
  step(*adagrad);
  std::vector<float> after = table.tensor().to_vector<float>();
  EXPECT_FLOAT_EQ(after[2], 1);                                   // untouched row
  EXPECT_NEAR(after[4], 0 - 0.1 * 2 / std::sqrt(0.1 + 4), 1e-6);  // row 2 seen twice: g = 2
  EXPECT_FLOAT_EQ(store.find("t/Adagrad/accumulator")->tensor().to_vector<float>()[2], 0.1f);
}

TEST(OptimizersTest, ClippingAndSchedules) {
  std::vector<Gradient> grads{Tensor::from_vector<double>({3, 0}),
                              Tensor::from_vector<double>({4})};
  EXPECT_DOUBLE_EQ(nn::global_norm(grads), 5);
  EXPECT_DOUBLE_EQ(nn::clip_by_global_norm(grads, 1.0), 5);
  EXPECT_NEAR(grads[0].dense().to_vector<double>()[0], 0.6, 1e-12);
  EXPECT_NEAR(grads[1].dense().to_vector<double>()[0], 0.8, 1e-12);

  auto exp_decay = nn::exponential_decay(1.0, 10, 0.5);
  EXPECT_DOUBLE_EQ((*exp_decay)(20), 0.25);
  EXPECT_DOUBLE_EQ((*nn::exponential_decay(1.0, 10, 0.5, true))(15), 0.5);
  auto piecewise = nn::piecewise_constant({10, 20}, {1.0, 0.5, 0.1});
  EXPECT_EQ((*piecewise)(10), 1.0);
  EXPECT_EQ((*piecewise)(11), 0.5);
  EXPECT_EQ((*piecewise)(100), 0.1);
  auto cosine = nn::cosine_decay(2.0, 100, 0.1);
  EXPECT_NEAR((*cosine)(50), 2.0 * (0.9 * 0.5 + 0.1), 1e-12);
  EXPECT_NEAR((*cosine)(500), 0.2, 1e-12);
  EXPECT_THROW(nn::piecewise_constant({10}, {1.0}), InvalidArgumentError);

  // A schedule drives the step size through the optimizer's iterations.
  nn::VariableStore store;
  auto opt = nn::optimizers::sgd(nn::piecewise_constant({0}, {1.0, 0.0}));
  std::vector<double> w = run(*opt, {1.0}, 3, store);
  EXPECT_DOUBLE_EQ(w[0], 0.0);  // first step at lr 1 moves w to 0, then lr 0

  nn::OptimizerOptions clip;
  clip.global_clipnorm = 0.1;
  nn::VariableStore store2;
  std::vector<double> clipped =
      run(*nn::optimizers::sgd(1.0, 0, false, clip), {3.0, 4.0}, 1, store2);
  EXPECT_NEAR(clipped[0], 3.0 - 0.06, 1e-12);
}

TEST(OptimizersTest, MismatchedGradientIsAnError) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{2}, nn::initializers::zeros());
  try {
    nn::optimizers::sgd()->apply_gradients({Tensor::zeros(Shape{3})}, {&w});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cadre
