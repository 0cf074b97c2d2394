// Sharded checkpoints under MultiWorkerMirrored with real processes on 127.0.0.1 (Gloo over
// TCP): each worker writes its share of the variables as a part, the chief commits the
// manifest; the checkpoint restores alike on one device, on parameter servers and under
// three workers, a part split by rows holds its step while the updates after the save go on,
// and a worker killed while it writes its part never leaves a published checkpoint.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "cadre/checkpoint/reader.h"
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

// The multi-worker helper as a job of `workers` training tasks (a chief and workers) and
// `ps` ps tasks, every checkpoint sharded; one task without TF_CONFIG for a job of one.
class MwmsJob {
 public:
  MwmsJob(int workers, int ps, std::string logs) : workers_(workers), logs_(std::move(logs)) {
    auto addresses = [](int n) {
      std::string list;
      for (int i = 0; i < n; ++i) {
        list +=
            (i ? ", \"" : "\"") + std::string("127.0.0.1:") + std::to_string(free_port()) + "\"";
      }
      return "[" + list + "]";
    };
    cluster_ = "\"cluster\": {\"chief\": " + addresses(1);
    if (workers > 1) cluster_ += ", \"worker\": " + addresses(workers - 1);
    if (ps > 0) cluster_ += ", \"ps\": " + addresses(ps);
    cluster_ += "}";
    ps_ = ps;
  }

  // Starts every task training to `steps` in `model_dir`, each step paced by `step_ms`.
  void start(const std::string& model_dir, int steps, int step_ms = 0) {
    for (int i = 0; i < ps_; ++i) children_.add(task("ps", i, model_dir, steps, step_ms));
    for (int i = 0; i + 1 < workers_; ++i) {
      workers_pids_.push_back(children_.add(task("worker", i, model_dir, steps, step_ms)));
    }
    chief_ = children_.add(task("chief", 0, model_dir, steps, step_ms));
  }
  // Trains to `steps`; the chief's exit status, once every training task has ended.
  int train(const std::string& model_dir, int steps) {
    start(model_dir, steps);
    for (pid_t worker : workers_pids_) children_.wait(worker, 120);
    int status = children_.wait(chief_, 120);
    children_.stop();
    return status;
  }
  // Sets `name` in every task's environment (a HELPER_ variable).
  void set_env(std::string name, std::string value) {
    env_.emplace_back(std::move(name), std::move(value));
  }
  pid_t worker_pid(int i) const { return workers_pids_[static_cast<size_t>(i)]; }
  pid_t chief_pid() const { return chief_; }
  std::string chief_log() const { return read_log(logs_ + "-chief0"); }
  int wait_chief(double seconds) { return children_.wait(chief_, seconds); }

 private:
  pid_t task(const std::string& type, int index, const std::string& model_dir, int steps,
             int step_ms) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"HELPER_SHARDED", "1"},
        {"HELPER_TRANSPORT", "gloo"},
        {"HELPER_STEP_SLEEP_MS", std::to_string(step_ms)},
        testing::job_secret_env()};
    env.insert(env.end(), env_.begin(), env_.end());
    if (workers_ > 1 || ps_ > 0) {
      env.emplace_back("TF_CONFIG", "{" + cluster_ + ", \"task\": {\"type\": \"" + type +
                                        "\", \"index\": " + std::to_string(index) + "}}");
    }
    return testing::spawn({CADRE_MULTI_WORKER_HELPER, model_dir, std::to_string(steps)}, env,
                          logs_ + "-" + type + std::to_string(index));
  }

  int workers_, ps_ = 0;
  std::string logs_, cluster_;
  testing::Children children_;
  std::vector<pid_t> workers_pids_;
  std::vector<std::pair<std::string, std::string>> env_;
  pid_t chief_ = -1;
};

class MwmsShardedCheckpointTest : public testing::TempDirTest {};

// Two workers write a sharded checkpoint of step 20, each its share; from copies of it one
// more step is trained on one device, on 2 ps tasks and under 3 workers. One device and the
// ps tasks take the same steps, so their checkpoints of step 21 are identical; three workers
// sum the gradients in another order (within 1e-5).
TEST_F(MwmsShardedCheckpointTest, EachWorkerWritesItsShareAndAnyStrategyRestoresIt) {
  MwmsJob two(2, 0, path("log-a"));
  ASSERT_EQ(two.train(path("a"), 20), 0) << tail(two.chief_log());
  auto saved = checkpoint::CheckpointReader::open(path("a/model.ckpt-20.h5"));
  EXPECT_EQ(saved->format_version(), 2);
  std::vector<std::string> parts = files_matching(path("a"), "model.ckpt-20.part-");
  ASSERT_EQ(parts.size(), 2u);
  std::set<std::string> tasks;
  size_t datasets = 0;
  for (const std::string& part : parts) {
    auto reader = checkpoint::CheckpointReader::open(path("a/" + part));
    tasks.insert(reader->attributes().at("task"));
    EXPECT_FALSE(reader->variables().empty()) << part << " holds no share";
    datasets += reader->variables().size();
  }
  EXPECT_EQ(tasks, (std::set<std::string>{"chief:0", "worker:0"}));
  EXPECT_EQ(datasets, saved->variables().size()) << "the tiny model's variables go whole";
  EXPECT_EQ(ckpt_tool("verify " + path("a")).substr(0, 3), "0: ")
      << ckpt_tool("verify " + path("a"));

  struct Resume {
    std::string name;
    int workers, ps;
  };
  for (const Resume& r : {Resume{"one", 1, 0}, Resume{"ps", 1, 2}, Resume{"three", 3, 0}}) {
    std::string dir = path(r.name);
    std::filesystem::copy(path("a"), dir);
    MwmsJob job(r.workers, r.ps, path("log-" + r.name));
    ASSERT_EQ(job.train(dir, 21), 0) << tail(job.chief_log());
    EXPECT_NE(job.chief_log().find("resuming from " + dir + "/model.ckpt-20.h5 at step 20"),
              std::string::npos)
        << tail(job.chief_log());
  }
  EXPECT_EQ(ckpt_tool("diff " + path("one/model.ckpt-21.h5") + " " + path("ps/model.ckpt-21.h5")),
            "0: no variables differ\n");
  EXPECT_EQ(files_matching(path("three"), "model.ckpt-21.part-").size(), 3u);
  auto one = checkpoint::CheckpointReader::open(path("one/model.ckpt-21.h5"));
  auto three = checkpoint::CheckpointReader::open(path("three/model.ckpt-21.h5"));
  ASSERT_EQ(one->variables().size(), three->variables().size());
  for (const auto& [name, info] : one->variables()) {
    std::vector<double> a = one->read(name).to_vector<double>();
    std::vector<double> b = three->read(name).to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << name << "[" << i << "]";
  }
}

// A [1536, 1536] kernel and its slots go by rows, half to each worker's part, each copied
// while training goes on: the updates after the save claim what of those rows the copy has
// not reached and make it in their own pass, and the checkpoint holds the step it was taken
// at, bit for bit the one of a job that stops at that step.
TEST_F(MwmsShardedCheckpointTest, RowsOfAKernelSavedWhileUpdatesGoOnHoldTheirStep) {
  for (const char* name : {"going", "stopping"}) {
    MwmsJob job(2, 0, path(std::string("log-") + name));
    job.set_env("HELPER_WIDE", "1536");
    int steps = std::string(name) == "going" ? 20 : 10;
    ASSERT_EQ(job.train(path(name), steps), 0) << tail(job.chief_log());
  }
  std::set<std::string> kernel_rows;
  for (const std::string& part : files_matching(path("going"), "model.ckpt-10.part-")) {
    for (const auto& [name, info] :
         checkpoint::CheckpointReader::open(path("going/" + part))->variables()) {
      if (name.starts_with("wide/kernel/rows-")) kernel_rows.insert(name);
    }
  }
  EXPECT_EQ(kernel_rows, (std::set<std::string>{"wide/kernel/rows-0", "wide/kernel/rows-768"}));
  EXPECT_EQ(
      ckpt_tool("diff " + path("going/model.ckpt-10.h5") + " " + path("stopping/model.ckpt-10.h5")),
      "0: no variables differ\n");
}

// Worker 1 killed while it writes its part of the second save (the first is published):
// that save is never published, and the job started again resumes from the first. The part
// holds rows of a [2048, 2048] kernel and its slots (24 MB), whose write (streamed, fsynced,
// read back for its CRC) outlasts the kill's landing however fast the writer runs.
TEST_F(MwmsShardedCheckpointTest, AWorkerKilledMidWriteNeverPublishesItsCheckpoint) {
  std::string dir = path("m");
  std::filesystem::create_directories(dir);
  int inotify = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(inotify, 0);
  ASSERT_GE(::inotify_add_watch(inotify, dir.c_str(), IN_CREATE), 0);
  MwmsJob job(2, 0, path("log"));
  job.set_env("HELPER_WIDE", "2048");
  job.start(dir, 1000, /*step_ms=*/5);
  std::string first = await_created(inotify, "model.ckpt-10.part-1-of-2.", ".tmp-");
  std::string temporary = await_created(inotify, "model.ckpt-20.part-1-of-2.", ".tmp-");
  ASSERT_FALSE(first.empty() || temporary.empty()) << tail(job.chief_log());
  ::kill(job.worker_pid(0), SIGKILL);
  ::close(inotify);
  ASSERT_TRUE(std::filesystem::exists(dir + "/" + temporary)) << "killed after the write";
  EXPECT_NE(job.wait_chief(120), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.ckpt-20.h5")) << tail(job.chief_log());
  EXPECT_EQ(*checkpoint::latest_checkpoint(dir), dir + "/model.ckpt-10.h5");

  MwmsJob again(2, 0, path("log-again"));
  again.set_env("HELPER_WIDE", "2048");
  ASSERT_EQ(again.train(dir, 30), 0) << tail(again.chief_log());
  EXPECT_NE(again.chief_log().find("resuming from " + dir + "/model.ckpt-10.h5 at step 10"),
            std::string::npos);
  EXPECT_TRUE(files_matching(dir, ".tmp-").empty());
  EXPECT_EQ(files_matching(dir, "model.ckpt-20.part-").size(), 2u) << "the new save's parts only";
  EXPECT_EQ(ckpt_tool("verify " + dir).substr(0, 3), "0: ") << ckpt_tool("verify " + dir);
}

}  // namespace
}  // namespace cadre
