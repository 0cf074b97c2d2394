// CheckpointManager: the publish sequence, asynchronous saves, durability and what a failure
// at each step of a save leaves behind (what it keeps and removes: manager_retention_test.cc).
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
#include "cadre/nn/variable.h"
#include "core/base/strings.h"
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

// The env's log since clear_log(), every temporary file named "<name>.tmp".
std::vector<std::string> log_of_temporaries(FaultEnv& env) {
  std::vector<std::string> log = env.log();
  for (std::string& entry : log) {
    entry = std::regex_replace(entry, std::regex("\\.tmp-[^ ]+"), ".tmp");
  }
  return log;
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
    auto reader =
        CheckpointReader::open(dir.file(checkpoint_file_name("model.ckpt", data.global_step)));
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
