// A deferred copy holds the values its tensors had when it was deferred, whichever thread
// makes it and whatever writes the variables afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/kernels/optimizer.h"
#include "core/nn/deferred_copy.h"
#include "tests/core/deferred_copy_test_util.h"

namespace cadre {
namespace {

using testing::floats_of;

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
    expected.push_back(floats_of(t));
  }
  const void* w_buffer = w.tensor().raw_data();
  nn::defer_copy(std::make_shared<nn::DeferredCopy>(tensors));
  step();  // Adam writes w, b, both slots of each and the iteration count in place
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(floats_of(held[i]), expected[i]) << store.variables()[i]->name();
    EXPECT_NE(held[i].raw_data(), store.variables()[i]->tensor().raw_data())
        << "not a copy: " << store.variables()[i]->name();
  }
  EXPECT_EQ(w.tensor().raw_data(), w_buffer) << "the variable keeps its own buffer";
  EXPECT_NE(floats_of(w.tensor()), expected[0]) << "the update did happen";

  Tensor before = b.tensor();
  std::vector<float> b_values = floats_of(before);
  nn::defer_copy(std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&before}));
  b.assign(Tensor::zeros(Shape{32}));
  EXPECT_EQ(floats_of(before), b_values);
  EXPECT_EQ(floats_of(b.tensor()), std::vector<float>(32, 0.0f));
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
    EXPECT_EQ(floats_of(tensors[i]), std::vector<float>(1024, static_cast<float>(i))) << i;
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
  EXPECT_EQ(floats_of(a), std::vector<float>(16, 1.0f));
  EXPECT_EQ(floats_of(b), std::vector<float>(8, 2.0f));
  EXPECT_TRUE(strided.is_contiguous());
  EXPECT_EQ(strided.shape(), Shape({4, 2}));
  EXPECT_EQ(floats_of(strided), std::vector<float>(8, 3.0f));
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
  EXPECT_EQ(floats_of(b), std::vector<float>(3, 2.0f));  // the others are copied
  nn::finish_deferred_copies();                          // none left
}

// Every variable of a store as a checkpoint's copy takes it: the tensors to copy (held
// here, so that writers replace their own), the memory they go to, their values now.
struct VariablesToCopy {
  std::vector<Tensor> held, memory;
  std::vector<Tensor*> tensors;
  std::vector<std::vector<float>> expected;

  explicit VariablesToCopy(nn::VariableStore& store) {
    for (nn::Variable* v : store.variables()) {
      held.push_back(v->tensor());
      memory.push_back(Tensor::empty(v->shape(), v->dtype()));
    }
    for (Tensor& t : held) {
      tensors.push_back(&t);
      expected.push_back(floats_of(t));
    }
  }
  VariablesToCopy(const VariablesToCopy&) = delete;  // `tensors` points into `held`
  VariablesToCopy& operator=(const VariablesToCopy&) = delete;
};

// The update claims the copies of the variables and slots it overwrites and makes them in its
// own pass; what it does not write (the step counter) is copied before it starts. Variables
// of several kernel chunks, so that each chunk's copy is made before that chunk's rule.
TEST(DeferredCopyTest, AnUpdateCopiesOutWhatItOverwritesAndTheSameUpdateIsMade) {
  auto make = [](nn::VariableStore& store) {
    nn::VariableStoreScope scope(store);
    nn::Variable& w = nn::get_variable("w", Shape{300, 200}, nn::initializers::random_normal());
    nn::Variable& b = nn::get_variable("b", Shape{200}, nn::initializers::random_normal());
    return std::pair{&w, &b};
  };
  nn::VariableStore store, twin;
  auto [w, b] = make(store);
  auto [tw, tb] = make(twin);
  tw->assign(w->tensor());
  tb->assign(b->tensor());
  auto optimizer = nn::optimizers::adam(0.1);
  auto step = [&](nn::VariableStore& s, nn::Variable* x, nn::Variable* y) {
    nn::VariableStoreScope scope(s);
    GradientTape tape;
    Tensor loss = sum(square(x->read() + y->read()));
    optimizer->minimize(tape, loss, {x, y});
  };
  step(store, w, b);
  step(twin, tw, tb);
  VariablesToCopy variables(store);
  std::vector<Tensor>& held = variables.held;
  std::vector<Tensor>& memory = variables.memory;
  const std::vector<std::vector<float>>& expected = variables.expected;
  std::vector<std::atomic<int>> asked(held.size());
  auto copy = std::make_shared<nn::DeferredCopy>(variables.tensors, [&](size_t i) {
    asked[i].fetch_add(1);
    return memory[i];
  });
  nn::defer_copy(copy);
  step(store, w, b);
  step(twin, tw, tb);
  EXPECT_EQ(copy->error(), nullptr);
  for (size_t i = 0; i < held.size(); ++i) {
    const std::string& name = store.variables()[i]->name();
    EXPECT_EQ(asked[i].load(), 1) << name;
    EXPECT_EQ(held[i].raw_data(), memory[i].raw_data()) << name;
    EXPECT_EQ(floats_of(held[i]), expected[i]) << name;
    EXPECT_EQ(floats_of(store.variables()[i]->tensor()), floats_of(twin.variables()[i]->tensor()))
        << "not the update a step without a copy makes: " << name;
  }
  EXPECT_NE(floats_of(w->tensor()), expected[0]) << "the update did happen";
}

// A user's optimizer, written against apply_dense alone: plain SGD that also counts its
// updates in a slot, both written with Tensor::assign.
class CountingSgd : public nn::Optimizer {
 public:
  CountingSgd() : Optimizer("CountingSgd", 0.1, {}) {}

 protected:
  std::vector<SlotSpec> slot_specs() const override { return {{"count", 0.0}}; }
  void apply_dense(std::span<Tensor> vars, std::span<const Tensor> grads,
                   std::vector<std::vector<Tensor>>& slots, double lr, int64_t) override {
    for (size_t i = 0; i < vars.size(); ++i) {
      vars[i].assign(vars[i] - grads[i] * lr);
      slots[0][i].assign(slots[0][i] + 1.0);
    }
  }
};

// Such an optimizer needs nothing of checkpoints: the copies its update would overwrite are
// made before it runs, and it may write the variables as it likes.
TEST(DeferredCopyTest, AnOptimizerThatOnlyOverridesApplyDenseUpdatesAfterTheCopy) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{300, 200}, nn::initializers::random_normal());
  CountingSgd optimizer;
  auto step = [&] {
    GradientTape tape;
    optimizer.minimize(tape, sum(square(w.read())), {&w});
  };
  step();
  VariablesToCopy variables(store);
  std::vector<Tensor>& held = variables.held;
  std::vector<Tensor>& memory = variables.memory;
  const std::vector<std::vector<float>>& expected = variables.expected;
  auto copy =
      std::make_shared<nn::DeferredCopy>(variables.tensors, [&](size_t i) { return memory[i]; });
  nn::defer_copy(copy);
  std::vector<float> before = floats_of(w.tensor());
  step();
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_FALSE(nn::deferred_copies_pending());
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(floats_of(held[i]), expected[i]) << store.variables()[i]->name();
  }
  std::vector<float> after = floats_of(w.tensor());
  for (size_t i = 0; i < after.size(); i += 997) {
    EXPECT_FLOAT_EQ(after[i], before[i] - 0.1f * 2 * before[i]) << i;
  }
}

// What a claim leaves to its writer and what it copies first; a claim never made fails the
// copy instead of handing the checkpoint memory of unknown age.
TEST(DeferredCopyTest, AClaimTakesOnlyItsTargetsAndAClaimNeverMadeFailsTheCopy) {
  Tensor a = Tensor::full(Shape{5}, 1.0);
  Tensor b = Tensor::full(Shape{7}, 2.0);
  Tensor c = Tensor::full(Shape{3}, 3.0);
  Tensor slot_a = a, slot_b = b, slot_c = c;
  auto copy = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&slot_a, &slot_b, &slot_c});
  nn::defer_copy(copy);
  Tensor unrelated = Tensor::full(Shape{5}, 9.0);
  {
    nn::ClaimedCopies claimed = nn::claim_deferred_copies(std::vector<Tensor>{b, unrelated, a});
    ASSERT_EQ(claimed.copies().size(), 2u);  // in the copy's order
    EXPECT_EQ(claimed.copies()[0].from, a.raw_data());
    EXPECT_EQ(claimed.copies()[1].from, b.raw_data());
    EXPECT_EQ(claimed.copies()[1].bytes, 7 * sizeof(float));
    EXPECT_NE(slot_c.raw_data(), c.raw_data()) << "c is not the writer's: copied before it writes";
    EXPECT_EQ(floats_of(slot_c), std::vector<float>(3, 3.0f));
    EXPECT_EQ(slot_a.raw_data(), a.raw_data()) << "a is the writer's to copy";
    // The writer copies, then overwrites.
    for (const nn::CopyOut& out : claimed.copies()) std::memcpy(out.to, out.from, out.bytes);
    a.assign(Tensor::zeros(Shape{5}));
    b.assign(Tensor::zeros(Shape{7}));
    claimed.done();
  }
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_EQ(floats_of(slot_a), std::vector<float>(5, 1.0f));
  EXPECT_EQ(floats_of(slot_b), std::vector<float>(7, 2.0f));
  EXPECT_TRUE(nn::claim_deferred_copies(std::vector<Tensor>{a}).copies().empty()) << "none left";

  Tensor d = Tensor::full(Shape{4}, 4.0);
  Tensor slot_d = d;
  auto failing = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&slot_d});
  nn::defer_copy(failing);
  { nn::ClaimedCopies dropped = nn::claim_deferred_copies(std::vector<Tensor>{d}); }
  ASSERT_NE(failing->error(), nullptr);
  EXPECT_THROW(std::rethrow_exception(failing->error()), InternalError);
  EXPECT_EQ(slot_d.raw_data(), d.raw_data()) << "the slot is left as it was";
  EXPECT_NO_THROW(nn::finish_deferred_copies());  // and nothing is pending any more
}

// A claimant waits for the copies other threads have started; each of those wakes it, though
// none is the copy's last (the claimant's own are).
TEST(DeferredCopyTest, AClaimantWaitsForACopyAnotherThreadStartedAndIsWokenByIt) {
  Tensor a = Tensor::full(Shape{4}, 1.0);
  Tensor b = Tensor::full(Shape{4}, 2.0);
  Tensor slot_a = a, slot_b = b;
  std::atomic<bool> started{false}, release{false};
  auto copy =
      std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&slot_a, &slot_b}, [&](size_t i) {
        if (i == 0) {
          started = true;
          while (!release) std::this_thread::yield();
        }
        return Tensor();
      });
  nn::defer_copy(copy);
  std::thread copier([&] { copy->run(); });
  while (!started) std::this_thread::yield();
  auto claimed = std::make_shared<std::promise<size_t>>();
  std::future<size_t> made = claimed->get_future();
  std::thread claimant([&, claimed] {
    nn::ClaimedCopies c = nn::claim_deferred_copies(std::vector<Tensor>{b});
    size_t n = c.copies().size();
    for (const nn::CopyOut& out : c.copies()) std::memcpy(out.to, out.from, out.bytes);
    c.done();
    claimed->set_value(n);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(made.wait_for(std::chrono::milliseconds(0)), std::future_status::ready)
      << "the claimant went on before the copy of a was made";
  release = true;
  ASSERT_EQ(made.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the claimant was never woken";
  EXPECT_EQ(made.get(), 1u);
  claimant.join();
  copier.join();
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_EQ(floats_of(slot_a), std::vector<float>(4, 1.0f));
  EXPECT_EQ(floats_of(slot_b), std::vector<float>(4, 2.0f));
  EXPECT_NE(slot_b.raw_data(), b.raw_data());
}

// The CPU kernel: each CopyOut receives the old values, whether the rule writes its tensor
// (copied chunk by chunk) or not (copied at the end), and the update is the one made
// without copies.
TEST(DeferredCopyTest, AFusedUpdateCopiesOutTheOldValuesAndUpdatesAsWithout) {
  const int64_t n = 50000;  // several chunks of the kernel
  auto fill = [&](double base) { return testing::sawtooth(n, base, 997); };
  Tensor w = fill(1), g = fill(-0.5), m = fill(0.1), v = fill(0.2), other = fill(7);
  std::vector<float> w0 = floats_of(w), m0 = floats_of(m), v0 = floats_of(v);
  Tensor to_w = Tensor::empty(Shape{n}), to_v = Tensor::empty(Shape{n}),
         to_other = Tensor::empty(Shape{n});
  std::vector<nn::CopyOut> outs{{v.raw_data(), to_v.raw_data(), v.nbytes()},
                                {other.raw_data(), to_other.raw_data(), other.nbytes()},
                                {w.raw_data(), to_w.raw_data(), w.nbytes()}};
  auto [w2, m2, v2] = testing::adam_with_copies(w, g, m, v, outs);
  EXPECT_EQ(floats_of(to_w), w0);
  EXPECT_EQ(floats_of(to_v), v0);
  EXPECT_EQ(floats_of(to_other), floats_of(other));
  EXPECT_EQ(floats_of(w), floats_of(w2));
  EXPECT_EQ(floats_of(m), floats_of(m2));
  EXPECT_EQ(floats_of(v), floats_of(v2));
  EXPECT_NE(floats_of(w), w0);
}

}  // namespace
}  // namespace cadre
