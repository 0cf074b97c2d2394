#include <gtest/gtest.h>

#include <cmath>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"

namespace cadre {
namespace {

TEST(AutodiffTest, GradientOfWatchedTensor) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor y = sum(x * x * x);
  Gradient g = tape.gradient(y, x);
  EXPECT_EQ(g.dense().to_vector<double>(), (std::vector<double>{3, 12, 27}));
}

TEST(AutodiffTest, TargetNotOnTapeSaysSo) {
  Tensor x = Tensor::from_vector<double>({1, 2});
  Tensor y = sum(x * 2.0);  // computed before the tape existed
  GradientTape tape;
  tape.watch(x);
  try {
    tape.gradient(y, x);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("not on this tape"), std::string::npos) << e.what();
  }
}

TEST(AutodiffTest, UnwatchedTensorsAreNotRecorded) {
  Tensor x = Tensor::from_vector<double>({1, 2});
  GradientTape tape;
  Tensor y = sum(x * 2.0);
  EXPECT_EQ(tape.num_records(), 0u);
  EXPECT_THROW(tape.gradient(y, x), InvalidArgumentError);
}

TEST(AutodiffTest, UnconnectedSourcesAndPersistence) {
  Tensor x = Tensor::from_vector<double>({1, 2});
  Tensor z = Tensor::from_vector<double>({5});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(z);
  Tensor y = sum(exp(x));
  auto grads = tape.gradient(y, {x, z});
  EXPECT_TRUE(grads[0].defined());
  EXPECT_FALSE(grads[1].defined());
  auto zero = tape.gradient(y, std::vector<Tensor>{z}, UnconnectedGradients::kZero);
  EXPECT_EQ(zero[0].dense().to_vector<double>(), (std::vector<double>{0}));
  // A persistent tape answers again.
  EXPECT_NEAR(tape.gradient(y, x).dense().to_vector<double>()[1], std::exp(2.0), 1e-12);
}

TEST(AutodiffTest, NonPersistentTapeAnswersOnce) {
  Tensor x = Tensor::from_vector<double>({1});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * 3.0;
  tape.gradient(y, x);
  EXPECT_THROW(tape.gradient(y, x), FailedPreconditionError);
}

TEST(AutodiffTest, GradientsAccumulateOverUses) {
  Tensor x = Tensor::from_vector<double>({2});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x + x * 3.0 + x.reshape({1, 1}).reshape({1});
  EXPECT_EQ(tape.gradient(y, x).dense().item<double>(), 2 * 2 + 3 + 1);
}

// The ready hook announces each source's gradient once, final, as soon as the backward
// pass is done with it: the second layer's weights before the first's (which are used again
// later in the forward pass, so their gradient accumulates until then), and an unconnected
// source at the end.
TEST(AutodiffTest, ReadyHookGivesEachFinalGradientAsSoonAsItIsDone) {
  Tensor x = Tensor::from_vector<double>({1, -2, 3, 0.5, 2, -1}, Shape{2, 3});
  Tensor w1 = Tensor::from_vector<double>({0.1, 0.2, -0.3, 0.4, 0.5, -0.6}, Shape{3, 2});
  Tensor w2 = Tensor::from_vector<double>({0.7, -0.8}, Shape{2, 1});
  Tensor unused = Tensor::from_vector<double>({1});
  GradientTape tape;
  for (const Tensor& t : {w1, w2, unused}) tape.watch(t);
  Tensor h = relu(matmul(x, w1));
  Tensor y = sum(matmul(h, w2)) + sum(w1 * w1);  // w1 used again after w2
  std::vector<size_t> order;
  std::vector<Gradient> announced(3);
  auto grads = tape.gradient(y, {w1, w2, unused}, UnconnectedGradients::kNone, Tensor(),
                             [&](size_t i, const Gradient& g) {
                               order.push_back(i);
                               announced[i] = g;
                             });
  // sum(w1 * w1) is the last op, so w1's last contribution comes first in the backward
  // sweep, but its first use (matmul(x, w1)) is reached last: w2 is final before w1.
  EXPECT_EQ(order, (std::vector<size_t>{1, 0, 2}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(announced[i].dense().to_vector<double>(), grads[i].dense().to_vector<double>()) << i;
  }
  EXPECT_FALSE(announced[2].defined());
  EXPECT_FALSE(grads[2].defined());
}

// announce() hands a dense layer's kernel gradient over unbuilt when its op finishes it: the
// receiver builds it whole (the same bits as gradient()) or by rows, the kernel's input
// features (the same values); the bias, and a kernel used again after the layer, come built.
TEST(AutodiffTest, AnnounceLeavesADenseLayersKernelForItsReceiverToBuildByRows) {
  Tensor x = Tensor::from_vector<double>({1, -2, 3, 0.5, 2, -1, 0.25, 4}, Shape{2, 4});
  Tensor w1 = Tensor::from_vector<double>(
      {0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, -1.1, 1.2}, Shape{4, 3});
  Tensor b1 = Tensor::from_vector<double>({0.1, -0.2, 0.3});
  Tensor w2 = Tensor::from_vector<double>({0.7, -0.8, 0.9}, Shape{3, 1});
  auto forward = [&](bool w2_again) {
    Tensor h = linear(x, w1, b1, Activation::kRelu);
    Tensor y = sum(linear(h, w2, Tensor()));
    return w2_again ? y + sum(w2 * w2) : y;
  };
  for (bool w2_again : {false, true}) {
    std::vector<Gradient> expected;
    {
      GradientTape tape;
      for (const Tensor& t : {w1, b1, w2}) tape.watch(t);
      expected = tape.gradient(forward(w2_again), {w1, b1, w2});
    }
    GradientTape tape;
    for (const Tensor& t : {w1, b1, w2}) tape.watch(t);
    std::vector<Gradient> announced(3);
    std::vector<size_t> order;
    tape.announce(forward(w2_again), {w1, b1, w2}, [&](size_t i, const Gradient& g) {
      order.push_back(i);
      announced[i] = g;
    });
    EXPECT_EQ(order, (std::vector<size_t>{2, 0, 1})) << w2_again;
    EXPECT_EQ(announced[2].deferred() != nullptr, !w2_again);
    EXPECT_EQ(announced[1].deferred(), nullptr);
    const autodiff::DeferredGradient* kernel = announced[0].deferred();
    ASSERT_NE(kernel, nullptr);
    EXPECT_EQ(kernel->shape(), (Shape{4, 3}));
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(announced[i].to_dense().to_vector<double>(),
                expected[i].dense().to_vector<double>())
          << i;
    }
    std::vector<double> whole = expected[0].dense().to_vector<double>();
    for (auto [begin, end] : {std::pair{0, 1}, std::pair{1, 3}, std::pair{3, 4}}) {
      Tensor rows = kernel->rows(begin, end);
      ASSERT_EQ(rows.shape(), (Shape{end - begin, 3}));
      std::vector<double> got = rows.to_vector<double>();
      for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], whole[begin * 3 + k], 1e-12);
    }
  }
}

TEST(AutodiffTest, NoGradScopeStopsRecording) {
  Tensor x = Tensor::from_vector<double>({2});
  GradientTape tape;
  tape.watch(x);
  Tensor y;
  {
    NoGradScope no_grad;
    y = x * 5.0;
  }
  EXPECT_EQ(tape.num_records(), 0u);
}

TEST(AutodiffTest, EmbeddingGradientIsSparse) {
  Tensor table = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, Shape{3, 2});
  GradientTape tape;
  tape.watch(table);
  Tensor rows = gather(table, Tensor::from_vector<int64_t>({2, 2, 0}));
  Tensor loss = sum(rows * 2.0);
  Gradient g = tape.gradient(loss, table);
  ASSERT_TRUE(g.is_sparse());
  EXPECT_EQ(g.sparse().indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 0}));
  EXPECT_EQ(g.sparse().values.shape(), (Shape{3, 2}));
  EXPECT_EQ(g.to_dense().to_vector<float>(), (std::vector<float>{2, 2, 0, 0, 4, 4}));
  // Two lookups of one table keep the gradient sparse; a dense use densifies it.
  GradientTape tape2;
  tape2.watch(table);
  Tensor two = sum(gather(table, Tensor::from_vector<int64_t>({1}))) +
               sum(gather(table, Tensor::from_vector<int64_t>({1, 0})));
  Gradient g2 = tape2.gradient(two, table);
  ASSERT_TRUE(g2.is_sparse());
  EXPECT_EQ(g2.to_dense().to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 0, 0}));
  GradientTape tape3;
  tape3.watch(table);
  Tensor mixed = sum(gather(table, Tensor::from_vector<int64_t>({1}))) + sum(table);
  Gradient g3 = tape3.gradient(mixed, table);
  EXPECT_FALSE(g3.is_sparse());
  EXPECT_EQ(g3.dense().to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 1, 1}));
}

// The tape sums and densifies gradients with the kernels, below the ops: the sums are the
// ops' sums, and a sparse gradient's indices are checked as scatter_add checks them.
TEST(AutodiffTest, GradientsAddUpAndDensifyBelowTheOps) {
  IndexedSlices a{Tensor::from_vector<int32_t>({0, 2}),
                  Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2}), Shape{3, 2}};
  IndexedSlices b{Tensor::from_vector<int64_t>({2}),
                  Tensor::from_vector<float>({10, 20}, Shape{1, 2}), Shape{3, 2}};
  Gradient both = add_gradients(a, b);
  ASSERT_TRUE(both.is_sparse());
  EXPECT_EQ(both.sparse().indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(both.to_dense().to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 13, 24}));
  Tensor ones = Tensor::ones(Shape{3, 2});
  EXPECT_EQ(add_gradients(ones, b).dense().to_vector<float>(),
            (std::vector<float>{1, 1, 1, 1, 11, 21}));
  EXPECT_EQ(add_gradients(ones, ones).dense().to_vector<float>(), std::vector<float>(6, 2));
  EXPECT_EQ(ones.to_vector<float>(), std::vector<float>(6, 1));  // sums are new tensors

  IndexedSlices outside{Tensor::from_vector<int64_t>({1, 3}), Tensor::zeros(Shape{2, 2}),
                        Shape{3, 2}};
  try {
    Gradient(outside).to_dense();
    FAIL() << "an index outside the dense shape was scattered";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("indices[1] = 3 is not in [0, 3)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(add_gradients(ones, Tensor::ones(Shape{2, 3})), InvalidArgumentError);
}

TEST(AutodiffTest, NothingOutlivesTheTape) {
  std::weak_ptr<Buffer> saved;
  {
    Tensor x = Tensor::from_vector<double>({1, 2, 3});
    GradientTape tape;
    tape.watch(x);
    Tensor hidden = exp(x);  // exp's backward keeps its output alive
    saved = hidden.buffer();
    Tensor y = sum(hidden);
    tape.gradient(y, x);
  }
  EXPECT_TRUE(saved.expired());
}

}  // namespace
}  // namespace cadre
