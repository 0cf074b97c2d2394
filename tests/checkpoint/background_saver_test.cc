// The memory of an asynchronous save's snapshot: prepared ahead (allocated and faulted in by
// the writer), the first save's copy, made by a writer of the variable that claims it as an
// optimizer's update does, takes no page faults, and the second save copies into the first's
// memory; each snapshot holds the values of the moment it was taken.
#include "checkpoint/background_saver.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <numeric>
#include <semaphore>
#include <vector>

#include "core/nn/deferred_copy.h"

namespace cadre::checkpoint {
namespace {

// The last `rows` rows of a [rows + 1, kColumns] float kernel: what a worker's part holds of
// a kernel split by rows. 32 MiB or more, which glibc never serves from its heap: new memory
// (each test its own size, which the caching allocator has not kept either).
constexpr int64_t kColumns = 8192;

long pages(int64_t rows) { return static_cast<long>(rows * kColumns * 4 / 4096); }

Tensor counting(int64_t rows, float base) {
  std::vector<float> values(static_cast<size_t>((rows + 1) * kColumns));
  std::iota(values.begin(), values.end(), base);
  return Tensor::from_vector(values, Shape{rows + 1, kColumns});
}

CheckpointData part_of(const Tensor& kernel) {
  CheckpointData part;
  part.variables["kernel/rows"] = kernel.slice(0, 1, kernel.dim(0));
  part.variables["bias"] = Tensor::from_vector(std::vector<float>{1, 2, 3}, Shape{3});
  return part;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// What the writer was given: where the kernel's rows lie, and their values.
struct Written {
  const void* data = nullptr;
  std::vector<float> values;
};

// A saver whose writer keeps what it is given, and starts each write only when let (so that
// its own page faults stay out of what the test counts).
class HeldSaver {
 public:
  HeldSaver()
      : saver_([this](const CheckpointData& snapshot) {
          may_write_.acquire();
          const Tensor& rows = snapshot.variables.at("kernel/rows");
          written_.push_back({rows.raw_data(), rows.to_vector<float>()});
        }) {}

  BackgroundSaver& saver() { return saver_; }
  // Saves `kernel`'s rows, then copies them as an update about to overwrite the kernel does
  // (claim_deferred_copies), then overwrites it; the page faults of all threads meanwhile.
  long save_and_overwrite(Tensor& kernel) {
    long before = minor_faults();
    saver_.save_deferred(part_of(kernel));
    nn::ClaimedCopies claimed = nn::claim_deferred_copies(std::vector<Tensor>{kernel});
    for (const nn::CopyOut& out : claimed.copies()) out.make();
    claimed.done();
    long faults = minor_faults() - before;
    kernel.assign(Tensor::zeros(kernel.shape()));
    may_write_.release();
    saver_.wait();
    return faults;
  }
  const std::vector<Written>& written() const { return written_; }

 private:
  std::counting_semaphore<4> may_write_{0};
  std::vector<Written> written_;  // the writer's, read once it is done
  BackgroundSaver saver_;         // last: its writer uses the members above
};

void expect_rows_of(const Written& written, int64_t rows, float base) {
  std::vector<float> expected = counting(rows, base).slice(0, 1, rows + 1).to_vector<float>();
  ASSERT_EQ(written.values.size(), expected.size());
  EXPECT_EQ(written.values, expected) << "the snapshot of the kernel counting from " << base;
}

TEST(BackgroundSaverTest, PreparedMemoryTakesTheFirstCopysFaultsAndTheSecondReusesIt) {
  constexpr int64_t kRows = 1536;  // 48 MiB
  Tensor kernel = counting(kRows, 1);
  HeldSaver held;
  held.saver().prepare_snapshot(part_of(kernel));
  held.saver().wait_prepared();
  long first = held.save_and_overwrite(kernel);
  kernel.assign(counting(kRows, 7));
  long second = held.save_and_overwrite(kernel);
  // The copy itself faults nothing in; a few pages of bookkeeping may.
  EXPECT_LT(first, pages(kRows) / 16) << "of " << pages(kRows) << " pages";
  EXPECT_LT(second, pages(kRows) / 16) << "of " << pages(kRows) << " pages";
  ASSERT_EQ(held.written().size(), 2u);
  EXPECT_EQ(held.written()[1].data, held.written()[0].data) << "the first snapshot's memory";
  expect_rows_of(held.written()[0], kRows, 1);
  expect_rows_of(held.written()[1], kRows, 7);
}

// The same first save unprepared: what the test above counts is what preparing takes away.
TEST(BackgroundSaverTest, AnUnpreparedFirstCopyFaultsItsMemoryIn) {
  constexpr int64_t kRows = 1280;  // 40 MiB
  Tensor kernel = counting(kRows, 3);
  HeldSaver held;
  long first = held.save_and_overwrite(kernel);
  EXPECT_GT(first, pages(kRows) / 2) << "of " << pages(kRows) << " pages";
  ASSERT_EQ(held.written().size(), 1u);
  expect_rows_of(held.written()[0], kRows, 3);
}

}  // namespace
}  // namespace cadre::checkpoint
