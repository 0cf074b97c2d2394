// CheckpointWatcher: each checkpoint once, in step order, never a partial file, with
// retention removing files under it.
#include "cadre/checkpoint/watcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cadre/checkpoint/manager.h"
#include "core/base/clock.h"
#include "core/base/strings.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/fault_env.h"

namespace cadre::checkpoint {
namespace {

using testing::small_model;
using testing::TempDir;

TEST(WatcherTest, YieldsEachCheckpointOnceInStepOrderThenTimesOut) {
  for (bool inotify : {true, false}) {
    TempDir dir;
    CheckpointManagerOptions options;
    options.keep_checkpoint_max = 0;
    CheckpointManager manager(dir.path(), options);
    for (int step : {30, 10, 20}) manager.save(small_model(step));
    // Never a partial file: a temporary of a save in progress is not a checkpoint.
    testing::write_file(dir.file("model.ckpt-40.h5.tmp-1-1"), "partial");
    WatcherOptions watch;
    watch.use_inotify = inotify;
    watch.poll_interval_seconds = 0.05;
    CheckpointWatcher watcher(dir.path(), watch);
    for (int step : {10, 20, 30}) {
      auto reader = watcher.next(5);
      ASSERT_NE(reader, nullptr);
      EXPECT_EQ(reader->global_step(), step);
    }
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(watcher.next(0.3), nullptr);
    EXPECT_GE(seconds_since(start), 0.29);
    EXPECT_LT(seconds_since(start), 2.0);
    manager.save(small_model(50));
    auto reader = watcher.next(5);
    ASSERT_NE(reader, nullptr);
    EXPECT_EQ(reader->global_step(), 50);
  }
}

TEST(WatcherTest, WakesPromptlyOnANewCheckpoint) {
  TempDir dir;
  WatcherOptions watch;
  watch.poll_interval_seconds = 30;  // only inotify can wake it in time
  CheckpointWatcher watcher(dir.path(), watch);
  std::thread saver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CheckpointManager manager(dir.path());
    manager.save(small_model(1));
  });
  auto start = std::chrono::steady_clock::now();
  auto reader = watcher.next(10);
  saver.join();
  ASSERT_NE(reader, nullptr);
  EXPECT_LT(seconds_since(start), 5.0);
}

// Lists a checkpoint that retention has just removed, as a listing taken a moment earlier
// would.
class StaleListingEnv : public cadre::testing::FaultEnv {
 public:
  std::vector<std::string> list_dir(const std::string& dir) override {
    std::vector<std::string> names = FaultEnv::list_dir(dir);
    names.push_back("model.ckpt-2.h5");
    return names;
  }
};

TEST(WatcherTest, SkipsACheckpointRemovedBeforeItCouldBeOpened) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 0;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  manager.save(small_model(3));
  WatcherOptions watch;
  watch.env = std::make_shared<StaleListingEnv>();
  watch.lease_seconds = 0;
  CheckpointWatcher watcher(dir.path(), watch);
  EXPECT_EQ(watcher.next(1)->global_step(), 1);
  EXPECT_EQ(watcher.next(1)->global_step(), 3);  // 2 skipped with a warning
  EXPECT_EQ(watcher.last_step(), 3);
  EXPECT_EQ(watcher.next(0.05), nullptr);
  // An evaluator resuming after step 1 starts at the next one.
  WatcherOptions resume;
  resume.after_step = 1;
  CheckpointWatcher resumed(dir.path(), resume);
  EXPECT_EQ(resumed.next(1)->global_step(), 3);
}

// A saver with keep_checkpoint_max = 1 racing a watcher.
void race(bool protect_unseen, std::vector<int64_t>* seen) {
  TempDir dir;
  const int kSaves = 15;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 1;
  WatcherOptions watch;
  watch.poll_interval_seconds = 0.02;
  watch.protect_unseen = protect_unseen;
  CheckpointWatcher watcher(dir.path(), watch);
  std::thread saver([&] {
    CheckpointManager manager(dir.path(), options);
    for (int step = 1; step <= kSaves; ++step) {
      manager.save(small_model(step, static_cast<float>(step)));
      std::this_thread::sleep_for(std::chrono::milliseconds(step % 3 == 0 ? 0 : 15));
    }
  });
  while (seen->empty() || seen->back() < kSaves) {
    auto reader = watcher.next(10);
    if (reader == nullptr) break;
    seen->push_back(reader->global_step());
    // Evaluate it: slower than the saver, so retention deletes files the watcher has not
    // reached; what it yields is complete even once deleted.
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    Tensor kernel = reader->read("hidden1/kernel");
    testing::expect_equal_tensors(
        small_model(reader->global_step(), reader->global_step()).variables["hidden1/kernel"],
        kernel, "hidden1/kernel");
  }
  saver.join();
}

TEST(WatcherTest, SeesEveryCheckpointOnceWhenProtectingUnseenOnesFromRetention) {
  std::vector<int64_t> seen;
  race(/*protect_unseen=*/true, &seen);
  std::vector<int64_t> all;
  for (int step = 1; step <= 15; ++step) all.push_back(step);
  EXPECT_EQ(seen, all);
}

TEST(WatcherTest, WithoutProtectionSkipsRemovedCheckpointsAndYieldsTheRestOnceInOrder) {
  std::vector<int64_t> seen;
  race(/*protect_unseen=*/false, &seen);
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
  EXPECT_EQ(seen.back(), 15);
}

}  // namespace
}  // namespace cadre::checkpoint
