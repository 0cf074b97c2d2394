// Sharded parameter-server checkpoints with real processes on 127.0.0.1: each ps task writes
// its part, the chief commits the manifest; the checkpoint restores identically under 1, 2
// and 3 ps tasks and on one device, and a task killed in the middle of writing its part or
// the manifest never leaves a published checkpoint without its parts.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/integration/model_dir_files.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::await_created;
using testing::ckpt_tool;
using testing::files_matching;

using testing::free_port;
using testing::read_log;
using testing::tail;

// The multi-worker helper as a chief and `ps` ps tasks, with sharded checkpoints at every
// size; `ps` 0: one process, no TF_CONFIG.
class ShardedCluster {
 public:
  // `embedding`: the model has an embedding, a row-access variable that the ps tasks
  // restore themselves; `wide` > 0: a [wide, wide] kernel more, sliced over the ps tasks.
  ShardedCluster(int ps, std::string logs, bool embedding = false, int wide = 0)
      : ps_(ps), logs_(std::move(logs)), embedding_(embedding), wide_(wide) {
    cluster_ = "\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(free_port()) + "\"]";
    std::string addresses;
    for (int i = 0; i < ps; ++i) {
      addresses +=
          (i ? ", \"" : "\"") + std::string("127.0.0.1:") + std::to_string(free_port()) + "\"";
    }
    if (ps > 0) cluster_ += ", \"ps\": [" + addresses + "]";
    cluster_ += "}";
  }
  ~ShardedCluster() { stop(); }

  // Starts every task training to `steps` in `model_dir` (pausing `step_ms` per step).
  void start(const std::string& model_dir, int steps, int step_ms = 0) {
    for (int i = 0; i < ps_; ++i) ps_pids_.push_back(task("ps", i, model_dir, steps, step_ms));
    chief_ = task("chief", 0, model_dir, steps, step_ms);
  }
  // Trains to `steps`; the chief's exit status.
  int train(const std::string& model_dir, int steps) {
    start(model_dir, steps);
    int status = testing::wait_for(chief_, 120);
    chief_ = -1;
    stop();
    return status;
  }
  pid_t ps_pid(int i) const { return ps_pids_[static_cast<size_t>(i)]; }
  pid_t chief_pid() const { return chief_; }
  std::string chief_log() const { return read_log(logs_ + "-chief0"); }
  std::string ps_log(int i) const { return read_log(logs_ + "-ps" + std::to_string(i)); }
  void stop() {
    if (chief_ > 0) ::kill(chief_, SIGKILL), testing::wait_for(chief_);
    chief_ = -1;
    for (pid_t pid : ps_pids_) ::kill(pid, SIGKILL), testing::wait_for(pid);
    ps_pids_.clear();
  }

 private:
  pid_t task(const std::string& type, int index, const std::string& model_dir, int steps,
             int step_ms) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"HELPER_SHARDED", "1"},
        {"HELPER_EMBEDDING", embedding_ ? "1" : "0"},
        {"HELPER_WIDE", std::to_string(wide_)},
        {"HELPER_STEP_SLEEP_MS", std::to_string(step_ms)},
        testing::job_secret_env()};
    if (ps_ > 0) {
      env.emplace_back("TF_CONFIG", "{" + cluster_ + ", \"task\": {\"type\": \"" + type +
                                        "\", \"index\": " + std::to_string(index) + "}}");
    }
    return testing::spawn({CADRE_MULTI_WORKER_HELPER, model_dir, std::to_string(steps)}, env,
                          logs_ + "-" + type + std::to_string(index));
  }

  int ps_;
  std::string logs_, cluster_;
  bool embedding_;
  int wide_;
  std::vector<pid_t> ps_pids_;
  pid_t chief_ = -1;
};

class ShardedCheckpointTest : public testing::TempDirTest {};

// Two ps tasks write a sharded checkpoint of step 20; from copies of it one more step is
// trained under 2 ps tasks, 1, 3 and one process: the restored variables must be the same
// logical ones, so the four checkpoints of step 21 are identical.
TEST_F(ShardedCheckpointTest, RestoresIdenticallyUnderAnyNumberOfPsTasksAndOnOneDevice) {
  ShardedCluster two(2, path("log-a"));
  ASSERT_EQ(two.train(path("a"), 20), 0) << tail(two.chief_log());
  auto saved = checkpoint::CheckpointReader::open(path("a/model.ckpt-20.h5"));
  EXPECT_EQ(saved->format_version(), 2);
  EXPECT_EQ(files_matching(path("a"), "model.ckpt-20.part-").size(), 2u);
  EXPECT_EQ(ckpt_tool("verify " + path("a")).substr(0, 3), "0: ")
      << ckpt_tool("verify " + path("a"));

  for (int ps : {2, 1, 3, 0}) {
    std::string dir = path("from" + std::to_string(ps));
    std::filesystem::copy(path("a"), dir);
    ShardedCluster cluster(ps, path("log-" + std::to_string(ps)));
    ASSERT_EQ(cluster.train(dir, 21), 0) << tail(cluster.chief_log());
    EXPECT_NE(cluster.chief_log().find("resuming from " + dir + "/model.ckpt-20.h5 at step 20"),
              std::string::npos)
        << tail(cluster.chief_log());
    if (ps > 0) {
      EXPECT_EQ(files_matching(dir, "model.ckpt-21.part-").size(), static_cast<size_t>(ps));
    }
  }
  std::string reference = path("from2/model.ckpt-21.h5");
  for (const char* other : {"from1", "from3", "from0"}) {
    EXPECT_EQ(ckpt_tool("diff " + reference + " " + path(other) + "/model.ckpt-21.h5"),
              "0: no variables differ\n")
        << other;
  }
  // The step changed them: diff tells.
  EXPECT_NE(ckpt_tool("diff " + reference + " " + path("a/model.ckpt-20.h5")).substr(0, 3), "0: ");
}

// The embedding's table and slots are restored by the ps tasks, each reading its own rows
// from the parts of a checkpoint written under 2 ps tasks (the chief only names them): under
// 2, 1 and 3 ps tasks the logical variables are the same.
TEST_F(ShardedCheckpointTest, PsTasksRestoreTheirOwnRowsUnderAnyNumberOfPsTasks) {
  ShardedCluster two(2, path("log-a"), /*embedding=*/true);
  ASSERT_EQ(two.train(path("a"), 20), 0) << tail(two.chief_log());
  for (int ps : {2, 1, 3}) {
    std::string dir = path("from" + std::to_string(ps));
    std::filesystem::copy(path("a"), dir);
    ShardedCluster cluster(ps, path("log-" + std::to_string(ps)), /*embedding=*/true);
    ASSERT_EQ(cluster.train(dir, 21), 0) << tail(cluster.chief_log());
    for (int i = 0; i < ps; ++i) {
      for (const char* name : {"token/embeddings", "token/embeddings/Adam/m"}) {
        EXPECT_NE(cluster.ps_log(i).find(std::string(") of '") + name + "' from model.ckpt-20.h5"),
                  std::string::npos)
            << "ps:" << i << " did not read its rows of " << name << "\n"
            << tail(cluster.ps_log(i));
      }
    }
    EXPECT_EQ(cluster.chief_log().find("the chief restores the variables"), std::string::npos);
  }
  for (const char* other : {"from1", "from3"}) {
    EXPECT_EQ(ckpt_tool("diff " + path("from2/model.ckpt-21.h5") + " " + path(other) +
                        "/model.ckpt-21.h5"),
              "0: no variables differ\n")
        << other;
  }
}

// A ps task killed while it writes its part, and a chief killed while it writes the
// manifest: that save is never published, the next chief removes what it left, resumes from
// the checkpoint before and finishes.
TEST_F(ShardedCheckpointTest, ATaskKilledMidWriteNeverPublishesItsCheckpoint) {
  for (const std::string victim : {"ps", "chief"}) {
    SCOPED_TRACE(victim);
    std::string dir = path("m-" + victim);
    std::filesystem::create_directories(dir);
    int inotify = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ASSERT_GE(inotify, 0);
    ASSERT_GE(::inotify_add_watch(inotify, dir.c_str(), IN_CREATE), 0);
    // Each ps task's part holds half of a [2048, 2048] kernel and its slots: a write that
    // outlasts the kill's landing under load, which a few kilobytes did not.
    ShardedCluster cluster(2, path("log-" + victim), /*embedding=*/false, /*wide=*/2048);
    cluster.start(dir, 1000, /*step_ms=*/20);
    // While ps:1 writes its part of the second save, once the first is published: ps:1 is
    // killed then, or the chief, which waits for the parts before it writes the manifest.
    // (Under load the chief's commit of the first can lag until the second's parts begin.)
    std::string first = await_created(inotify, "model.ckpt-10.part-1-of-2.", ".tmp-");
    ASSERT_FALSE(first.empty()) << tail(cluster.chief_log());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (checkpoint::latest_checkpoint(dir) != dir + "/model.ckpt-10.h5" &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(checkpoint::latest_checkpoint(dir), dir + "/model.ckpt-10.h5")
        << tail(cluster.chief_log());
    std::string temporary = await_created(inotify, "model.ckpt-20.part-1-of-2.", ".tmp-");
    ASSERT_FALSE(temporary.empty()) << tail(cluster.chief_log());
    ::kill(victim == "ps" ? cluster.ps_pid(1) : cluster.chief_pid(), SIGKILL);
    ::close(inotify);
    if (victim == "ps") {
      ASSERT_TRUE(std::filesystem::exists(dir + "/" + temporary)) << "killed after the write";
    }
    testing::wait_for(cluster.chief_pid(), 120);
    cluster.stop();
    EXPECT_FALSE(std::filesystem::exists(dir + "/model.ckpt-20.h5"));
    // What the save left: parts without a manifest, or a temporary of a dead task.
    EXPECT_FALSE(files_matching(dir, "model.ckpt-20.part-").empty());
    EXPECT_EQ(checkpoint::latest_checkpoint(dir), dir + "/model.ckpt-10.h5");

    ShardedCluster again(2, path("log-again-" + victim), /*embedding=*/false, /*wide=*/2048);
    ASSERT_EQ(again.train(dir, 30), 0) << tail(again.chief_log());
    EXPECT_NE(again.chief_log().find("resuming from " + dir + "/model.ckpt-10.h5 at step 10"),
              std::string::npos);
    EXPECT_TRUE(files_matching(dir, ".tmp-").empty());
    EXPECT_EQ(files_matching(dir, "model.ckpt-20.part-").size(), 2u) << "the new save's parts only";
    EXPECT_EQ(ckpt_tool("verify " + dir).substr(0, 3), "0: ") << ckpt_tool("verify " + dir);
  }
}

}  // namespace
}  // namespace cadre
