// CheckpointManager: what it keeps and removes. Retention (the newest, one per period, the
// newest durable one), leases that protect a checkpoint from it until they expire or their
// holder dies, the temporaries of dead owners, and retention catching up once the readers
// let go.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <set>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "checkpoint/lease.h"
#include "core/base/process_id.h"
#include "tests/checkpoint/manager_test.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/fault_env.h"

namespace cadre::checkpoint {
namespace {

using cadre::testing::FaultEnv;
using testing::checkpoint_files;
using testing::files_in;
using testing::small_model;
using testing::TempDir;

TEST(ManagerTest, RetentionKeepsExactlyTheNewestCheckpoints) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 3;
  {
    CheckpointManager manager(dir.path(), options);
    for (int step = 1; step <= 7; ++step) manager.save(small_model(step * 100));
    EXPECT_EQ(files_in(dir.path()), checkpoint_files({500, 600, 700}));
    EXPECT_EQ(manager.checkpoints(), (std::vector<std::string>{dir.file("model.ckpt-500.h5"),
                                                               dir.file("model.ckpt-600.h5"),
                                                               dir.file("model.ckpt-700.h5")}));
  }
  // A new manager continues from the state file.
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(800));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({600, 700, 800}));
}

TEST(ManagerTest, KeepCheckpointMaxZeroKeepsEverything) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.keep_checkpoint_max = 0;
  CheckpointManager manager(dir.path(), options);
  for (int step = 1; step <= 4; ++step) manager.save(small_model(step));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({1, 2, 3, 4}));
}

TEST(ManagerTest, KeepCheckpointEveryNHoursPreservesOnePerPeriod) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 2;
  options.keep_checkpoint_every_n_hours = 1;
  CheckpointManager manager(dir.path(), options);
  for (int step = 1; step <= 8; ++step) {
    env->advance(1800);  // a checkpoint every half hour
    manager.save(small_model(step));
  }
  // 2, 4 and 6 are each an hour after the last one preserved; 7 and 8 are the newest.
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({2, 4, 6, 7, 8}));
  CheckpointState state = read_state(*env, dir.path()).value();
  EXPECT_EQ(state.all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-7.h5", "model.ckpt-8.h5"}));
}

TEST(ManagerTest, RetentionNeverDeletesALeasedCheckpoint) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 1;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  Lease lease(env, dir.path(), "evaluator-0");
  lease.hold(1, 1, /*seconds=*/30);
  manager.save(small_model(2));
  manager.save(small_model(3));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({1, 3}));
  EXPECT_EQ(manager.pending_deletions(), std::vector<std::string>{dir.file("model.ckpt-1.h5")});
  // The state file does not name it: it is out of the retention window, kept only for the reader.
  EXPECT_EQ(read_state(*env, dir.path())->all_model_checkpoint_paths,
            std::vector<std::string>{"model.ckpt-3.h5"});
  lease.release();
  manager.save(small_model(4));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({4}));
  EXPECT_TRUE(manager.pending_deletions().empty());
}

TEST(ManagerTest, AnExpiredLeaseNoLongerProtects) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 1;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  Lease lease(env, dir.path(), "evaluator-0");
  lease.hold(0, 100, /*seconds=*/10);
  manager.save(small_model(2));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({1, 2}));
  env->advance(11);  // the holder died and stopped renewing
  manager.save(small_model(3));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({3}));
}

TEST(ManagerTest, LeaseFilesAreReadAcrossHolders) {
  TempDir dir;
  auto env = posix_env();
  Lease a(env, dir.path(), "a"), b(env, dir.path(), "b");
  a.hold(5, 5, 60);
  b.hold(7, 9, 60);
  std::vector<LeaseRecord> leases = read_leases(*env, dir.path());
  ASSERT_EQ(leases.size(), 2u);
  double now = env->now_seconds();
  EXPECT_TRUE(is_leased(leases, 5, now));
  EXPECT_FALSE(is_leased(leases, 6, now));
  EXPECT_TRUE(is_leased(leases, 8, now));
  EXPECT_FALSE(is_leased(leases, 8, now + 61));
  b.release();
  EXPECT_EQ(read_leases(*env, dir.path()).size(), 1u);
  EXPECT_THROW(Lease(env, dir.path(), "bad/name"), InvalidArgumentError);
}

// durable_every_secs: only a save that long after the last durable one is fsynced;
// retention keeps that one until a newer one is durable; close() makes the newest durable.
TEST(ManagerTest, DurableEverySecsSyncsSomeSavesAndRetentionKeepsTheNewestDurableOne) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 2;
  options.durable_every_secs = 60;
  CheckpointManager manager(dir.path(), options);
  auto synced = [&] {
    std::vector<std::string> files;
    for (std::string entry : env->log()) {
      if (!entry.starts_with("sync model.ckpt-")) continue;
      files.push_back(std::regex_replace(entry.substr(5), std::regex("\\.tmp-[^ ]+"), ""));
    }
    env->clear_log();
    return files;
  };
  auto paths = [&] { return read_state(*env, dir.path()).value().all_model_checkpoint_paths; };
  manager.save(small_model(1));  // the first is durable
  EXPECT_EQ(synced(), std::vector<std::string>{"model.ckpt-1.h5"});
  for (int step = 2; step <= 4; ++step) {
    env->advance(10);
    manager.save(small_model(step));
  }
  EXPECT_TRUE(synced().empty());
  // The 2 newest, and 1 besides them as the durable one; 2 went.
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({1, 3, 4}));
  EXPECT_EQ(paths(),
            (std::vector<std::string>{"model.ckpt-1.h5", "model.ckpt-3.h5", "model.ckpt-4.h5"}));
  env->advance(30);  // 60 s after 1
  manager.save(small_model(5));
  EXPECT_EQ(synced(), std::vector<std::string>{"model.ckpt-5.h5"});
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({4, 5}));
  for (int step = 6; step <= 7; ++step) {
    env->advance(10);
    manager.save(small_model(step));
  }
  EXPECT_TRUE(synced().empty());
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({5, 6, 7}));
  manager.close();  // the newest becomes durable, and retention is as without durability
  EXPECT_EQ(synced(), std::vector<std::string>{"model.ckpt-7.h5"});
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({6, 7}));
  EXPECT_EQ(paths(), (std::vector<std::string>{"model.ckpt-6.h5", "model.ckpt-7.h5"}));
  manager.save(small_model(8));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({7, 8}));
  for (int step : {7, 8}) {
    EXPECT_EQ(
        CheckpointReader::open(dir.file(checkpoint_file_name("model.ckpt", step)))->global_step(),
        step);
  }
}

// Only what a dead owner left goes: a save in flight in another live process (a chief
// restarted while its predecessor finishes) keeps its temporary, and another host's is
// removed only once it has not changed for hours.
TEST(ManagerTest, RemovesOnlyTheTemporariesOfDeadOwners) {
  TempDir dir;
  ProcessId gone = this_process();
  ++gone.start_ticks;  // this pid, another start: a process that ended
  ProcessId parent = process_on_this_host(::getppid()).value();
  ProcessId remote{"another-host", 4242, 7};
  testing::write_file(dir.file("model.ckpt-5.h5.tmp-0-" + to_token(gone)), "partial");
  testing::write_file(dir.file("checkpoint.tmp-1-" + to_token(gone)), "partial");
  testing::write_file(dir.file("model.ckpt-6.h5.tmp-0-" + to_token(parent)), "in flight");
  testing::write_file(dir.file("model.ckpt-7.h5.tmp-0-" + to_token(remote)), "recent");
  testing::write_file(dir.file("model.ckpt-8.h5.tmp-0-" + to_token(remote)), "hours old");
  std::filesystem::last_write_time(
      dir.file("model.ckpt-8.h5.tmp-0-" + to_token(remote)),
      std::filesystem::file_time_type::clock::now() - std::chrono::hours(7));
  testing::write_file(dir.file("notes.txt"), "not ours");
  CheckpointManager manager(dir.path());
  EXPECT_EQ(files_in(dir.path()),
            (std::set<std::string>{"notes.txt", "model.ckpt-6.h5.tmp-0-" + to_token(parent),
                                   "model.ckpt-7.h5.tmp-0-" + to_token(remote)}));
}

TEST(ManagerTest, ALeaseOfADeadProcessProtectsNothingAndIsRemoved) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 1;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  ProcessId gone = this_process();
  ++gone.start_ticks;
  std::filesystem::create_directories(dir.file(".leases"));
  testing::write_file(dir.file(".leases/watcher-dead.lease"),
                      "holder: \"watcher-dead\"\nfirst_step: 0\nlast_step: 100\nexpires_at: " +
                          std::to_string(env->now_seconds() + 600) + "\nowner: \"" +
                          to_token(gone) + "\"\n");
  ASSERT_EQ(read_leases(*env, dir.path()).size(), 1u);
  manager.save(small_model(2));
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({2}));
  EXPECT_TRUE(read_leases(*env, dir.path()).empty()) << "the dead reader's lease is reclaimed";
}

// Retention catches up once the readers let go, also after training ended: the watcher that
// releases its lease deletes what retention dropped, and a new manager finishes what an
// earlier one could not.
TEST(ManagerTest, RetentionCatchesUpWhenTheReadersLetGo) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 1;
  {
    WatcherOptions watching;
    watching.env = env;
    watching.protect_unseen = true;  // an evaluator with policy "all", before any checkpoint
    watching.use_inotify = false;
    CheckpointWatcher watcher(dir.path(), watching);
    {
      CheckpointManager manager(dir.path(), options);
      for (int step : {1, 2, 3}) manager.save(small_model(step));
      manager.close();
      EXPECT_EQ(files_in(dir.path()), checkpoint_files({1, 2, 3}));
      EXPECT_EQ(read_pending_deletions(*env, dir.path()),
                (std::vector<std::string>{"model.ckpt-1.h5", "model.ckpt-2.h5"}));
    }
  }
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({3}));

  // A watcher that lets go after training ended also reclaims a dead predecessor's lease.
  ProcessId gone = this_process();
  ++gone.start_ticks;
  testing::write_file(dir.file(".leases/watcher-dead.lease"),
                      "holder: \"watcher-dead\"\nfirst_step: 0\nlast_step: 9\nexpires_at: " +
                          std::to_string(env->now_seconds() + 600) + "\nowner: \"" +
                          to_token(gone) + "\"\n");
  {
    WatcherOptions watching;
    watching.env = env;
    watching.use_inotify = false;
    CheckpointWatcher watcher(dir.path(), watching);
  }
  EXPECT_TRUE(read_leases(*env, dir.path()).empty());

  Lease lease(env, dir.path(), "evaluator-0");
  lease.hold(3, 4, /*seconds=*/60);
  {
    CheckpointManager manager(dir.path(), options);
    manager.save(small_model(4));
    manager.save(small_model(5));
  }
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({3, 4, 5}));
  lease.release();
  CheckpointManager restarted(dir.path(), options);
  EXPECT_EQ(files_in(dir.path()), checkpoint_files({5}));
  EXPECT_TRUE(restarted.pending_deletions().empty());
}

}  // namespace
}  // namespace cadre::checkpoint
