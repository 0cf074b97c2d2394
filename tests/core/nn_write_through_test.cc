// Write-through deferred copies, as a worker's checkpoint part takes them: the writer hands
// each block to the file from the variable's memory, an update copies the blocks it
// overwrites before the writer got to them into a bounded pool, and past the pool waits for
// the writer; the blocks written are those of the moment the copy was deferred.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "cadre/base/errors.h"
#include "core/nn/deferred_copy.h"
#include "tests/core/deferred_copy_test_util.h"

namespace cadre {
namespace {

using testing::floats_of;

// A [kThroughRows, kThroughCols] float32 tensor in blocks of kThroughBlockRows rows: three blocks.
constexpr int64_t kThroughRows = 30, kThroughCols = 8, kThroughBlockRows = 10;
constexpr size_t kThroughRowBytes = kThroughCols * sizeof(float);

// What a writer wrote of each block, by block.
struct WrittenBlocks {
  std::vector<std::vector<float>> blocks{3};

  void write(nn::DeferredCopy& copy, int64_t block) {
    copy.write_piece(copy.piece_at(0, block * kThroughBlockRows), [&](const void* data) {
      const float* values = static_cast<const float*>(data);
      blocks[static_cast<size_t>(block)].assign(values, values + kThroughBlockRows * kThroughCols);
    });
  }
  std::vector<float> all() const {
    std::vector<float> joined;
    for (const auto& b : blocks) joined.insert(joined.end(), b.begin(), b.end());
    return joined;
  }
};

// A [kThroughRows, kThroughCols] float32 sawtooth (testing::sawtooth).
Tensor through_tensor(double base, int64_t period) {
  return testing::sawtooth(kThroughRows * kThroughCols, base, period)
      .reshape({kThroughRows, kThroughCols});
}

// The write-through copy of `t` in blocks of kThroughBlockRows rows over `pool`, deferred.
std::shared_ptr<nn::DeferredCopy> defer_write_through(Tensor& t,
                                                      std::shared_ptr<nn::PiecePool> pool) {
  auto copy = std::make_shared<nn::DeferredCopy>(std::vector<Tensor*>{&t}, std::move(pool),
                                                 kThroughBlockRows * kThroughRowBytes);
  nn::defer_copy(copy);
  return copy;
}

// An update of every value of `t`, as an optimizer's: claims first, copies out, writes.
void overwrite(Tensor& t, double value) {
  std::vector<Tensor> targets{t};
  nn::ClaimedCopies claimed = nn::claim_deferred_copies(targets);
  for (const nn::CopyOut& out : claimed.copies()) out.make();
  claimed.done();
  t.assign(Tensor::full(t.shape(), value, DType::kFloat32));
}

TEST(WriteThroughTest, AnUpdateCopiesTheBlocksTheWriterHasNotTakenAndTheyAreWrittenAsBefore) {
  Tensor t = through_tensor(1, 7);
  const std::vector<float> before = floats_of(t);
  auto pool = std::make_shared<nn::PiecePool>(4);
  auto copy = defer_write_through(t, pool);
  WrittenBlocks written;
  written.write(*copy, 0);  // straight from the tensor
  // The update claims the two blocks left, copying them into the pool's buffers.
  std::vector<Tensor> targets{t};
  nn::ClaimedCopies claimed = nn::claim_deferred_copies(targets);
  EXPECT_EQ(claimed.copies().size(), 2u);
  for (const nn::CopyOut& out : claimed.copies()) out.make();
  claimed.done();
  t.assign(Tensor::full(t.shape(), 5.0, DType::kFloat32));
  EXPECT_FALSE(nn::deferred_copies_pending());  // the update may write: nothing waits
  written.write(*copy, 2);
  written.write(*copy, 1);
  copy->give_up_unwritten(nullptr);
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_EQ(written.all(), before);
  EXPECT_EQ(floats_of(t), std::vector<float>(kThroughRows * kThroughCols, 5.0f));
}

TEST(WriteThroughTest, WithThePoolLentOutAnUpdateWaitsForTheWriterToTakeWhatItOverwrites) {
  Tensor t = through_tensor(2, 5);
  const std::vector<float> before = floats_of(t);
  auto pool = std::make_shared<nn::PiecePool>(1);
  auto copy = defer_write_through(t, pool);
  const double blocked = nn::deferred_copy_blocked_seconds();
  WrittenBlocks written;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int64_t block = 0; block < 3; ++block) written.write(*copy, block);
  });
  // One block goes to the pool's one buffer; the update waits for the writer to take the
  // other two, then writes.
  overwrite(t, 7);
  writer.join();
  copy->give_up_unwritten(nullptr);
  EXPECT_EQ(copy->error(), nullptr);
  EXPECT_EQ(written.all(), before);
  EXPECT_GE(nn::deferred_copy_blocked_seconds() - blocked, 0.05);
  // Every buffer is back.
  EXPECT_NE(pool->try_get(), nullptr);
}

TEST(WriteThroughTest, BlocksTheWriterNeverTookFailAndNoUpdateWaitsForThem) {
  Tensor t = through_tensor(3, 11);
  auto pool = std::make_shared<nn::PiecePool>(1);
  auto copy = defer_write_through(t, pool);
  WrittenBlocks written;
  written.write(*copy, 0);
  copy->give_up_unwritten(std::make_exception_ptr(UnavailableError("disk full")));
  EXPECT_FALSE(nn::deferred_copies_pending());
  EXPECT_NE(copy->error(), nullptr);
  overwrite(t, 1);  // does not wait
  EXPECT_THROW(copy->piece_at(0, 5), InternalError);
}

TEST(WriteThroughTest, AWriterOfAViewCopiesOrWaitsForEveryBlockFirst) {
  Tensor t = through_tensor(4, 13);
  const std::vector<float> before = floats_of(t);
  auto pool = std::make_shared<nn::PiecePool>(4);
  auto copy = defer_write_through(t, pool);
  // A transposed view: which bytes it writes is not a range, so every block is made first.
  std::vector<Tensor> targets{t.transpose({1, 0})};
  nn::ClaimedCopies claimed = nn::claim_deferred_copies(targets);
  EXPECT_TRUE(claimed.copies().empty());
  EXPECT_FALSE(nn::deferred_copies_pending());
  claimed.done();
  t.assign(Tensor::zeros(t.shape()));
  WrittenBlocks written;
  for (int64_t block = 0; block < 3; ++block) written.write(*copy, block);
  copy->give_up_unwritten(nullptr);
  EXPECT_EQ(written.all(), before);
}

}  // namespace
}  // namespace cadre
