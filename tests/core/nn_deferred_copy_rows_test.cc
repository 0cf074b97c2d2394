// Deferred copies of row ranges, as a checkpoint part split by rows takes them: an update
// that overwrites the tensor claims the pieces of the range no thread has started and makes
// them in its own pass, and the copy still holds the values of the moment it was deferred.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/kernels/optimizer.h"
#include "core/nn/deferred_copy.h"
#include "tests/core/deferred_copy_test_util.h"

namespace cadre {
namespace {

using testing::floats_of;

// Rows of a [kRows, kCols] float32 kernel: a range spans several pieces of a deferred copy.
constexpr int64_t kRows = 1000, kCols = 3000;
constexpr size_t kRowBytes = kCols * sizeof(float);
static_assert(kRows * kRowBytes > 2 * nn::DeferredCopy::kPieceBytes);

const char* row_data(const Tensor& t, int64_t row) {
  return static_cast<const char*>(t.raw_data()) + static_cast<size_t>(row) * kRowBytes;
}

// A random kernel and its twin of the same values, in stores of their own, each updated by
// one optimizer on sum(x^2): the twin's updates are those made with no copy pending.
struct TwinKernels {
  explicit TwinKernels(std::shared_ptr<nn::Optimizer> updates) : optimizer(std::move(updates)) {
    w = make(store);
    tw = make(twin);
    tw->assign(w->tensor());
  }
  // One update of each.
  void step() {
    step(store, w);
    step(twin, tw);
  }

  std::shared_ptr<nn::Optimizer> optimizer;
  nn::VariableStore store, twin;
  nn::Variable* w;
  nn::Variable* tw;

 private:
  static nn::Variable* make(nn::VariableStore& in) {
    nn::VariableStoreScope scope(in);
    return &nn::get_variable("kernel", Shape{kRows, kCols}, nn::initializers::random_normal());
  }
  void step(nn::VariableStore& in, nn::Variable* x) {
    nn::VariableStoreScope scope(in);
    GradientTape tape;
    optimizer->minimize(tape, sum(square(x->read())), {x});
  }
};

// A claim of a tensor hands out the rows a copy takes of it, one CopyOut per range however
// many pieces it spans; a range of a tensor the writer does not write is copied first.
TEST(DeferredCopyRowsTest, AClaimHandsOutTheRowRangesOfItsTargets) {
  Tensor w = Tensor::full(Shape{kRows, kCols}, 1.0);
  Tensor other = Tensor::full(Shape{kRows, kCols}, 2.0);
  Tensor top = w.slice(0, 0, 300), bottom = w.slice(0, 600, kRows), rest = other.slice(0, 0, 500);
  auto copy = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&top, &rest, &bottom});
  nn::defer_copy(copy);
  {
    nn::ClaimedCopies claimed = nn::claim_deferred_copies(std::vector<Tensor>{w});
    ASSERT_EQ(claimed.copies().size(), 2u);
    EXPECT_EQ(claimed.copies()[0].from, row_data(w, 0));
    EXPECT_EQ(claimed.copies()[0].bytes, 300 * kRowBytes);
    EXPECT_EQ(claimed.copies()[1].from, row_data(w, 600));
    EXPECT_EQ(claimed.copies()[1].bytes, 400 * kRowBytes);
    EXPECT_EQ(top.raw_data(), w.raw_data()) << "not copied yet: the writer's";
    EXPECT_NE(rest.raw_data(), other.raw_data()) << "not the writer's: copied before it writes";
    for (const nn::CopyOut& out : claimed.copies()) out.make();
    w.assign(Tensor::zeros(Shape{kRows, kCols}));
    claimed.done();
  }
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_FALSE(nn::deferred_copies_pending());
  EXPECT_EQ(floats_of(top), std::vector<float>(300 * kCols, 1.0f));
  EXPECT_EQ(floats_of(bottom), std::vector<float>(400 * kCols, 1.0f));
  EXPECT_EQ(floats_of(rest), std::vector<float>(500 * kCols, 2.0f));
}

// An Adam update of a kernel whose rows, and its slots' rows, a checkpoint part still has to
// copy: the part holds the values before the update, bit for bit, and the update is the one
// made without a copy pending.
TEST(DeferredCopyRowsTest, AnUpdateClaimsARowRangeAndThePartHoldsTheOldValues) {
  TwinKernels k(nn::optimizers::adam(0.1));
  k.step();
  // The kernel, m and v, rows [400, 1000) of each: the second worker's share.
  std::vector<nn::Variable*> split;
  std::vector<Tensor> rows, memory;
  std::vector<std::vector<float>> expected;
  for (nn::Variable* v : k.store.variables()) {
    if (v->shape() != Shape{kRows, kCols}) continue;  // the step counter
    split.push_back(v);
    rows.push_back(v->tensor().slice(0, 400, kRows));
    memory.push_back(Tensor::empty(rows.back().shape()));
    expected.push_back(floats_of(rows.back()));
  }
  ASSERT_EQ(rows.size(), 3u);
  std::vector<Tensor*> tensors;
  for (Tensor& r : rows) tensors.push_back(&r);
  auto copy = std::make_shared<nn::DeferredCopy>(tensors, [&](size_t i) { return memory[i]; });
  nn::defer_copy(copy);
  k.step();
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_FALSE(nn::deferred_copies_pending());
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& name = split[i]->name();
    EXPECT_EQ(rows[i].raw_data(), memory[i].raw_data()) << name;
    EXPECT_EQ(floats_of(rows[i]), expected[i]) << name;
    EXPECT_EQ(floats_of(split[i]->tensor()), floats_of(k.twin.find(name)->tensor()))
        << "not the update a step without a copy makes: " << name;
  }
  EXPECT_NE(floats_of(k.w->tensor().slice(0, 400, kRows)), expected[0]) << "the update did happen";
}

// Two row ranges of one tensor pending at once: both halves of a kernel (two workers' parts
// in one process), and a second checkpoint's copy of rows the first one's also holds (made
// before the update, which claims the first's only). Each copy holds the old rows.
TEST(DeferredCopyRowsTest, TwoRowRangesOfOneTensorPendingAreBothMadeByTheUpdate) {
  TwinKernels k(nn::optimizers::sgd(0.1, /*momentum=*/0.9));
  k.step();
  const Tensor kernel = k.w->tensor();
  std::vector<float> old = floats_of(kernel);
  // Row 333 splits a piece: neither range starts or ends on a piece or a kernel chunk.
  Tensor first = kernel.slice(0, 0, 333), second = kernel.slice(0, 333, kRows);
  Tensor again = kernel.slice(0, 333, kRows);
  auto halves = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&first, &second});
  auto later = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&again});
  nn::defer_copy(halves);
  nn::defer_copy(later);
  k.step();
  EXPECT_EQ(halves->error(), nullptr);
  EXPECT_EQ(later->error(), nullptr);
  EXPECT_FALSE(nn::deferred_copies_pending());
  const size_t split = 333 * kCols;
  EXPECT_EQ(floats_of(first), std::vector<float>(old.begin(), old.begin() + split));
  EXPECT_EQ(floats_of(second), std::vector<float>(old.begin() + split, old.end()));
  EXPECT_EQ(floats_of(again), floats_of(second));
  EXPECT_NE(second.raw_data(), again.raw_data());
  EXPECT_EQ(floats_of(k.w->tensor()), floats_of(k.tw->tensor()));
  EXPECT_NE(floats_of(k.w->tensor()), old) << "the update did happen";
}

// The CPU kernel copies out element ranges of the tensors it writes, at any offset and
// across its chunks, several per tensor, and updates as it does without them.
TEST(DeferredCopyRowsTest, AFusedUpdateCopiesOutRangesOfItsTensors) {
  const int64_t n = 70001;  // several chunks of the kernel
  auto fill = [&](double base) { return testing::sawtooth(n, base, 991); };
  Tensor w = fill(1), g = fill(-0.5), m = fill(0.1), v = fill(0.2);
  std::vector<float> w0 = floats_of(w), v0 = floats_of(v);
  struct Range {
    const Tensor* of;
    int64_t begin, end;
  };
  std::vector<Range> ranges{{&w, 16000, 40001}, {&w, 3, 17}, {&v, 0, 16384}, {&w, 69000, n}};
  std::vector<Tensor> to;
  std::vector<nn::CopyOut> outs;
  for (const Range& r : ranges) {
    to.push_back(Tensor::empty(Shape{r.end - r.begin}));
    outs.push_back({r.of->data<float>() + r.begin, to.back().raw_data(),
                    static_cast<size_t>(r.end - r.begin) * sizeof(float)});
  }
  auto [w2, m2, v2] = testing::adam_with_copies(w, g, m, v, outs);
  for (size_t k = 0; k < ranges.size(); ++k) {
    const std::vector<float>& old = ranges[k].of == &w ? w0 : v0;
    EXPECT_EQ(floats_of(to[k]),
              std::vector<float>(old.begin() + ranges[k].begin, old.begin() + ranges[k].end))
        << k;
  }
  EXPECT_EQ(floats_of(w), floats_of(w2));
  EXPECT_EQ(floats_of(m), floats_of(m2));
  EXPECT_EQ(floats_of(v), floats_of(v2));
}

}  // namespace
}  // namespace cadre
