// A deferred copy holds the values its tensors had when it was deferred, whichever thread
// makes it and whatever writes the variables afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/deferred_copy.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"

namespace cadre {
namespace {

std::vector<float> values_of(const Tensor& t) { return t.contiguous().to_vector<float>(); }

TEST(DeferredCopyTest, AnOptimizerUpdateAndAnAssignFinishTheCopyBeforeTheyWrite) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{64, 32}, nn::initializers::random_normal());
  nn::Variable& b = nn::get_variable("b", Shape{32}, nn::initializers::random_normal());
  auto optimizer = nn::optimizers::adam(0.1);
  auto step = [&] {
    GradientTape tape;
    Tensor loss = sum(square(w.read() + b.read()));
    optimizer->minimize(tape, loss, {&w, &b});
  };
  step();  // the slots exist from here on
  std::vector<Tensor*> tensors;
  std::vector<Tensor> held;
  std::vector<std::vector<float>> expected;
  for (nn::Variable* v : store.variables()) held.push_back(v->tensor());
  for (Tensor& t : held) {
    tensors.push_back(&t);
    expected.push_back(values_of(t));
  }
  const void* w_buffer = w.tensor().raw_data();
  nn::defer_copy(std::make_shared<nn::DeferredCopy>(tensors));
  step();  // Adam writes w, b, both slots of each and the iteration count in place
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(values_of(held[i]), expected[i]) << store.variables()[i]->name();
    EXPECT_NE(held[i].raw_data(), store.variables()[i]->tensor().raw_data())
        << "not a copy: " << store.variables()[i]->name();
  }
  EXPECT_EQ(w.tensor().raw_data(), w_buffer) << "the variable keeps its own buffer";
  EXPECT_NE(values_of(w.tensor()), expected[0]) << "the update did happen";

  Tensor before = b.tensor();
  std::vector<float> b_values = values_of(before);
  nn::defer_copy(std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&before}));
  b.assign(Tensor::zeros(Shape{32}));
  EXPECT_EQ(values_of(before), b_values);
  EXPECT_EQ(values_of(b.tensor()), std::vector<float>(32, 0.0f));
}

TEST(DeferredCopyTest, ThreadsShareTheWorkAndCopyEachTensorOnce) {
  constexpr int kTensors = 200;
  std::vector<Tensor> tensors;
  std::vector<Tensor*> slots;
  for (int i = 0; i < kTensors; ++i) {
    tensors.push_back(Tensor::full(Shape{1024}, static_cast<double>(i)));
  }
  std::vector<Tensor> sources = tensors;
  for (Tensor& t : tensors) slots.push_back(&t);
  std::vector<std::atomic<int>> asked(kTensors);
  auto copy = std::make_shared<nn::DeferredCopy>(slots, [&](size_t i) {
    asked[i].fetch_add(1);
    return Tensor();
  });
  nn::defer_copy(copy);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back([&] { nn::finish_deferred_copies(); });
  copy->run();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(copy->error(), nullptr);
  for (int i = 0; i < kTensors; ++i) {
    EXPECT_EQ(asked[i].load(), 1) << i;
    EXPECT_NE(tensors[i].raw_data(), sources[i].raw_data()) << i;
    EXPECT_EQ(values_of(tensors[i]), std::vector<float>(1024, static_cast<float>(i))) << i;
  }
}

TEST(DeferredCopyTest, CopiesIntoMemoryThatFitsAndElsewhereIntoNewMemory) {
  Tensor a = Tensor::full(Shape{4, 4}, 1.0);
  Tensor b = Tensor::full(Shape{8}, 2.0);
  Tensor strided = Tensor::full(Shape{4, 6}, 3.0).slice(1, 1, 3);  // not contiguous
  Tensor fits = Tensor::zeros(Shape{4, 4});
  Tensor other_shape = Tensor::zeros(Shape{9});
  const void* fits_buffer = fits.raw_data();
  std::vector<Tensor*> slots{&a, &b, &strided};
  nn::DeferredCopy copy(slots, [&](size_t i) {
    return i == 0 ? fits : i == 1 ? other_shape : Tensor();
  });
  copy.run();
  EXPECT_EQ(a.raw_data(), fits_buffer);
  EXPECT_NE(b.raw_data(), other_shape.raw_data());
  EXPECT_EQ(values_of(a), std::vector<float>(16, 1.0f));
  EXPECT_EQ(values_of(b), std::vector<float>(8, 2.0f));
  EXPECT_TRUE(strided.is_contiguous());
  EXPECT_EQ(strided.shape(), Shape({4, 2}));
  EXPECT_EQ(values_of(strided), std::vector<float>(8, 3.0f));
}

TEST(DeferredCopyTest, AFailedCopyIsKeptForTheOwnerAndNeverThrownAtAWriter) {
  Tensor a = Tensor::full(Shape{3}, 1.0);
  Tensor b = Tensor::full(Shape{3}, 2.0);
  std::vector<Tensor*> slots{&a, &b};
  auto copy = std::make_shared<nn::DeferredCopy>(slots, [](size_t i) -> Tensor {
    if (i == 0) throw UnavailableError("no memory for tensor 0");
    return Tensor();
  });
  nn::defer_copy(copy);
  EXPECT_NO_THROW(nn::finish_deferred_copies());
  ASSERT_NE(copy->error(), nullptr);
  EXPECT_THROW(std::rethrow_exception(copy->error()), UnavailableError);
  EXPECT_EQ(values_of(b), std::vector<float>(3, 2.0f));  // the others are copied
  nn::finish_deferred_copies();                          // none left
}

}  // namespace
}  // namespace cadre
