// CheckpointManager: the publish sequence, retention, leases, asynchronous saves and what
// a failure at each step of a save leaves behind.
#include "cadre/checkpoint/manager.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/checkpoint/watcher.h"
#include "cadre/nn/deferred_copy.h"
#include "checkpoint/lease.h"
#include "core/base/process_id.h"
#include "core/base/strings.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/fault_env.h"

namespace cadre::checkpoint {
namespace {

using cadre::testing::FaultEnv;
using testing::small_model;
using testing::TempDir;

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) names.insert(entry.path().filename().string());
  }
  return names;
}

// The env's log since clear_log(), every temporary file named "<name>.tmp".
std::vector<std::string> log_of_temporaries(FaultEnv& env) {
  std::vector<std::string> log = env.log();
  for (std::string& entry : log) {
    entry = std::regex_replace(entry, std::regex("\\.tmp-[^ ]+"), ".tmp");
  }
  return log;
}

std::set<std::string> checkpoint_files(std::initializer_list<int> steps) {
  std::set<std::string> names = {"checkpoint"};
  for (int step : steps) names.insert(checkpoint_file_name("model.ckpt", step));
  return names;
}

TEST(ManagerTest, SaveWritesTheCheckpointAndATensorFlowStyleStateFile) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  CheckpointManager manager(dir.path(), options);
  EXPECT_EQ(manager.save(small_model(500)), dir.file("model.ckpt-500.h5"));
  env->advance(60);
  manager.save(small_model(1000));
  EXPECT_EQ(testing::read_file(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-1000.h5\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-500.h5\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-1000.h5\"\n"
            "all_model_checkpoint_timestamps: 1700000000\n"
            "all_model_checkpoint_timestamps: 1700000060\n"
            "last_preserved_timestamp: 1700000000\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-1000.h5"));
  EXPECT_EQ(CheckpointReader::open(dir.file("model.ckpt-1000.h5"))->global_step(), 1000);
}

TEST(ManagerTest, PublishesInTheOrderThatMakesCrashesHarmless) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.keep_checkpoint_max = 1;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  env->clear_log();
  manager.save(small_model(2));
  EXPECT_EQ(log_of_temporaries(*env),
            (std::vector<std::string>{
                "sync model.ckpt-2.h5.tmp",                     // the data is durable
                "rename model.ckpt-2.h5.tmp model.ckpt-2.h5",   // then published
                "syncdir",                                      // durably
                "write checkpoint.tmp", "sync checkpoint.tmp",  // then the state
                "rename checkpoint.tmp checkpoint", "syncdir",
                "remove model.ckpt-1.h5",  // then retention
            }));
}

TEST(ManagerTest, AFailureAtAnyStepOfASaveLeavesTheStateAndThePreviousCheckpointIntact) {
  auto probe = std::make_shared<FaultEnv>();
  int steps;
  std::vector<std::string> sequence;
  {
    TempDir dir;
    CheckpointManagerOptions options;
    options.env = probe;
    options.keep_checkpoint_max = 1;
    CheckpointManager manager(dir.path(), options);
    manager.save(small_model(1));
    probe->fail_from(-1);  // resets the count
    probe->clear_log();
    manager.save(small_model(2));
    steps = probe->mutations();
    sequence = probe->log();
  }
  // Failures from here on come after the new state is published: the save is done.
  int published = static_cast<int>(
      std::find_if(sequence.begin(), sequence.end(),
                   [](const std::string& op) { return op.starts_with("rename checkpoint.tmp"); }) -
      sequence.begin());
  // Deleting the old checkpoint is housekeeping: its failure is logged, not thrown.
  int housekeeping = static_cast<int>(
      std::find_if(sequence.begin(), sequence.end(),
                   [](const std::string& op) { return op.starts_with("remove"); }) -
      sequence.begin());
  ASSERT_GE(steps, 7);
  for (int fail_at = 0; fail_at < steps; ++fail_at) {
    TempDir dir;
    auto env = std::make_shared<FaultEnv>();
    CheckpointManagerOptions options;
    options.env = env;
    options.keep_checkpoint_max = 1;
    {
      CheckpointManager manager(dir.path(), options);
      manager.save(small_model(1));
      env->fail_from(fail_at);
      if (fail_at < housekeeping) {
        EXPECT_THROW(manager.save(small_model(2)), UnavailableError) << fail_at;
      } else {
        EXPECT_NO_THROW(manager.save(small_model(2))) << fail_at;
      }
    }
    env->fail_from(-1);
    // The state file names only complete, intact files, and the newest it names is whole.
    CheckpointState state = read_state(*env, dir.path()).value();
    for (const std::string& name : state.all_model_checkpoint_paths) {
      auto reader = CheckpointReader::open(dir.file(name));
      EXPECT_TRUE(reader->verify().empty()) << fail_at << " " << name;
    }
    int64_t latest = CheckpointReader::open(dir.file(state.model_checkpoint_path))->global_step();
    EXPECT_TRUE(latest == 1 || latest == 2) << fail_at;
    // A new manager cleans up and saves.
    CheckpointManager manager(dir.path(), options);
    manager.save(small_model(3));
    // Nothing is left behind: no temporary, no unrecorded newer checkpoint. Only a crash
    // after the state was published but before retention deleted the old checkpoint
    // leaves that one (unrecorded, older: it might be kept on purpose).
    std::set<std::string> files = files_in(dir.path());
    if (fail_at > published) {
      EXPECT_EQ(files, checkpoint_files({1, 3})) << fail_at;
    } else {
      EXPECT_EQ(files, checkpoint_files({3})) << fail_at;
    }
  }
}

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

TEST(ManagerTest, AsynchronousSaveWritesACopyTakenAtTheCall) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.async_save = true;
  CheckpointManager manager(dir.path(), options);
  CheckpointData data = small_model(10);
  Tensor kernel = data.variables["hidden1/kernel"];
  Tensor expected = kernel.clone();
  std::string path = manager.save(data);
  kernel.assign(Tensor::full(kernel.shape(), -1));  // training goes on and changes it
  manager.save(small_model(20));                    // waits for the first
  manager.close();
  auto reader = CheckpointReader::open(path);
  testing::expect_equal_tensors(expected, reader->read("hidden1/kernel"), "hidden1/kernel");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-20.h5"));
}

// copy_in_background: save() copies nothing; a write through finish_deferred_copies (as
// optimizers and Variable::assign do it) right after the save still leaves the values of the
// call in the file, save after save (the later ones copy into the earlier one's memory).
// A save with other names is checked again.
TEST(ManagerTest, CopyInBackgroundSavesTheValuesOfTheCallWhileTrainingWritesOn) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.async_save = true;
  options.copy_in_background = true;
  CheckpointManager manager(dir.path(), options);
  CheckpointData live = small_model(0);
  std::vector<std::pair<std::string, Tensor>> expected;
  for (int64_t step = 1; step <= 4; ++step) {
    CheckpointData data = live;  // the same buffers, as the Estimator hands its variables
    data.global_step = step;
    data.variables["Adam/iterations"] = Tensor::scalar<int64_t>(step);
    Tensor kernel = live.variables["hidden1/kernel"];
    expected.emplace_back(manager.save(std::move(data)), kernel.clone());
    nn::finish_deferred_copies();
    kernel.assign(Tensor::full(kernel.shape(), -static_cast<double>(step)));  // the next update
  }
  manager.close();
  for (const auto& [path, kernel] : expected) {
    auto reader = CheckpointReader::open(path);
    testing::expect_equal_tensors(kernel, reader->read("hidden1/kernel"), path);
    EXPECT_EQ(reader->read("Adam/iterations").item<int64_t>(), reader->global_step());
  }

  CheckpointData clash = small_model(5);
  clash.variables["hidden1"] = Tensor::scalar(1.0f);  // a dataset where a group must be
  EXPECT_THROW(manager.save(std::move(clash)), InvalidArgumentError);
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-4.h5"));
}

// The copier and the writer are background threads: SCHED_BATCH, so that waking them never
// preempts training on a busy core, and the writer at nice +10 besides (see manager.cc).
// Each is found by its name among this process's threads.
TEST(ManagerTest, TheCopierAndTheWriterNeverPreemptTrainingWhenTheyWake) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.async_save = true;
  options.copy_in_background = true;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  manager.wait();
  errno = 0;
  int own_nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  ASSERT_EQ(errno, 0);
  std::map<std::string, pid_t> threads;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    threads[name] = static_cast<pid_t>(std::stol(task.path().filename().string()));
  }
  ASSERT_TRUE(threads.count("cadre-ckpt-wr")) << "no writer thread";
  ASSERT_TRUE(threads.count("cadre-ckpt-cp")) << "no copier thread";
  EXPECT_EQ(::sched_getscheduler(threads["cadre-ckpt-wr"]), SCHED_BATCH);
  EXPECT_EQ(::sched_getscheduler(threads["cadre-ckpt-cp"]), SCHED_BATCH);
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(threads["cadre-ckpt-wr"])),
            std::min(19, own_nice + 10));
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(threads["cadre-ckpt-cp"])), own_nice);
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER) << "the caller's policy changed";
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
  EXPECT_EQ(paths(), (std::vector<std::string>{"model.ckpt-1.h5", "model.ckpt-3.h5",
                                               "model.ckpt-4.h5"}));
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
    EXPECT_EQ(CheckpointReader::open(dir.file(checkpoint_file_name("model.ckpt", step)))
                  ->global_step(),
              step);
  }
}

// A save that is not durable syncs nothing, the state file included (each sync of it was a
// journal commit and two cache flushes of the disk per save). What a crash of the machine
// may then leave (a state file written but never synced: empty; checkpoints since the
// durable one: empty or cut short) still restores the durable one.
TEST(ManagerTest, ASaveThatIsNotDurableSyncsNothingAndAMachineCrashComesBackToTheDurableOne) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.env = env;
  options.durable_every_secs = 60;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));  // durable
  for (int step = 2; step <= 3; ++step) {
    env->advance(10);
    env->clear_log();
    manager.save(small_model(step));
    std::string name = checkpoint_file_name("model.ckpt", step);
    EXPECT_EQ(log_of_temporaries(*env), (std::vector<std::string>{
                                            str_cat("rename ", name, ".tmp ", name),
                                            "write checkpoint.tmp",
                                            "rename checkpoint.tmp checkpoint",
                                        }));
  }
  std::filesystem::resize_file(dir.file("checkpoint"), 0);
  std::filesystem::resize_file(dir.file("model.ckpt-3.h5"),
                               std::filesystem::file_size(dir.file("model.ckpt-3.h5")) / 2);
  std::filesystem::resize_file(dir.file("model.ckpt-2.h5"), 0);
  std::unique_ptr<CheckpointReader> reader = open_latest_intact(dir.path(), env.get());
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->global_step(), 1);
}

// prepare_save() has the writer overwrite the last snapshot's memory to bring it into the
// cache; a save right after it (the writer still at it, or not started) must still write
// exactly the data it was given.
TEST(ManagerTest, PrepareSaveNeverChangesWhatIsSaved) {
  TempDir dir;
  CheckpointManagerOptions options;
  options.async_save = true;
  options.keep_checkpoint_max = 0;
  CheckpointManager manager(dir.path(), options);
  std::vector<CheckpointData> saved;
  for (int step = 1; step <= 40; ++step) {
    saved.push_back(small_model(step, static_cast<float>(step)));
    saved.back().variables["big"] = Tensor::full({1024, 1024}, static_cast<float>(step));
    manager.wait();  // else prepare_save() does nothing
    manager.prepare_save();
    // The save comes before the writer starts, while it writes, or after.
    std::this_thread::sleep_for(std::chrono::microseconds(step % 4 * 40));
    manager.save(saved.back());
  }
  manager.close();
  for (const CheckpointData& data : saved) {
    auto reader = CheckpointReader::open(dir.file(checkpoint_file_name("model.ckpt", data.global_step)));
    for (const auto& [name, value] : data.variables) {
      testing::expect_equal_tensors(value, reader->read(name), name);
    }
  }
}

TEST(ManagerTest, AnAsynchronousFailureSurfacesAtTheNextSaveAndAtClose) {
  TempDir dir;
  auto env = std::make_shared<FaultEnv>();
  CheckpointManagerOptions options;
  options.async_save = true;
  options.env = env;
  CheckpointManager manager(dir.path(), options);
  manager.save(small_model(1));
  manager.wait();
  env->fail_from(0);
  manager.save(small_model(2));  // returns: the failure happens in the background
  EXPECT_THROW(manager.save(small_model(3)), UnavailableError);  // not attempted
  env->fail_from(-1);
  manager.save(small_model(4));
  manager.wait();
  env->fail_from(0);
  manager.save(small_model(5));
  EXPECT_THROW(manager.close(), UnavailableError);
  EXPECT_NO_THROW(manager.close());  // reported once
  env->fail_from(-1);
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.file("model.ckpt-4.h5"));
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
  std::filesystem::last_write_time(dir.file("model.ckpt-8.h5.tmp-0-" + to_token(remote)),
                                   std::filesystem::file_time_type::clock::now() -
                                       std::chrono::hours(7));
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

// With checkpoints beside it, a corrupt state file is rebuilt (tests/checkpoint/healing_test.cc);
// without, there is nothing to name: it stays until the first save replaces it.
TEST(ManagerTest, ACorruptStateFileWithoutCheckpointsIsReplacedByTheFirstSave) {
  TempDir dir;
  testing::write_file(dir.file("checkpoint"), "model_checkpoint_path: model.ckpt-1.h5\n");
  CheckpointManager manager(dir.path());
  EXPECT_EQ(testing::read_file(dir.file("checkpoint")), "model_checkpoint_path: model.ckpt-1.h5\n");
  EXPECT_EQ(manager.latest_checkpoint(), std::nullopt);
  manager.save(small_model(1));
  EXPECT_EQ(read_state(*posix_env(), dir.path())->model_checkpoint_path, "model.ckpt-1.h5");
}

}  // namespace
}  // namespace cadre::checkpoint
