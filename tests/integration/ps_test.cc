// Parameter-server clusters as processes on 127.0.0.1: 2 ps tasks, 2 workers, a chief and an
// evaluator train Fashion-MNIST; checkpoints move between 2 ps, 3 ps and
// MultiWorkerMirrored; a killed worker leaves the job finishing; a killed ps under
// cadre_launch --max_restarts restarts the cluster, which finishes from the last checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::free_port;
using testing::read_log;
using testing::tail;

using testing::spawn;
using testing::wait_for;

std::string list(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    out += (i ? ", " : "") + std::string("\"127.0.0.1:") + std::to_string(free_port()) + "\"";
  }
  return out;
}

// A cluster of helper processes: a chief, `workers` workers and `ps` ps tasks.
class HelperCluster {
 public:
  HelperCluster(int workers, int ps) : workers_(workers), ps_(ps) {
    cluster_ = "\"cluster\": {\"chief\": [" + list(1) + "]";
    if (workers > 0) cluster_ += ", \"worker\": [" + list(workers) + "]";
    if (ps > 0) cluster_ += ", \"ps\": [" + list(ps) + "]";
    cluster_ += "}";
  }
  ~HelperCluster() { stop_ps(); }

  std::string tf_config(const std::string& type, int index) const {
    return "{" + cluster_ + ", \"task\": {\"type\": \"" + type +
           "\", \"index\": " + std::to_string(index) + "}}";
  }
  pid_t start(const std::string& type, int index, const std::string& model_dir, int steps,
              const std::string& log) {
    pid_t pid = spawn({CADRE_MULTI_WORKER_HELPER, model_dir, std::to_string(steps)},
                      {{"TF_CONFIG", tf_config(type, index)}, testing::job_secret_env()}, log);
    if (type == "ps") ps_pids_.push_back(pid);
    return pid;
  }
  // Trains to `steps` with every task; returns the chief's log.
  std::string train(const std::string& model_dir, int steps, const std::string& logs) {
    for (int i = 0; i < ps_; ++i)
      start("ps", i, model_dir, steps, logs + "-ps" + std::to_string(i));
    std::vector<pid_t> workers;
    for (int i = 0; i < workers_; ++i) {
      workers.push_back(start("worker", i, model_dir, steps, logs + "-worker" + std::to_string(i)));
    }
    pid_t chief = start("chief", 0, model_dir, steps, logs + "-chief");
    EXPECT_EQ(wait_for(chief), 0) << tail(read_log(logs + "-chief"));
    for (size_t i = 0; i < workers.size(); ++i) {
      EXPECT_EQ(wait_for(workers[i]), 0) << tail(read_log(logs + "-worker" + std::to_string(i)));
    }
    stop_ps();
    return read_log(logs + "-chief");
  }
  void stop_ps() {
    for (pid_t pid : ps_pids_) {
      ::kill(pid, SIGTERM);
      wait_for(pid);
    }
    ps_pids_.clear();
  }

 private:
  int workers_, ps_;
  std::string cluster_;
  std::vector<pid_t> ps_pids_;
};

std::unique_ptr<checkpoint::CheckpointReader> latest(const std::string& model_dir) {
  std::optional<std::string> path = checkpoint::latest_checkpoint(model_dir);
  EXPECT_TRUE(path.has_value()) << model_dir;
  return checkpoint::CheckpointReader::open(*path);
}

class PsClusterTest : public cadre::testing::TempDirTest {
 protected:
  // cadre_launch with `flags` running the multi-worker helper to `steps` in model_dir m.
  std::string helper_under_launch(const std::string& flags, int steps) const {
    return std::string(CADRE_LAUNCH) + " " + flags + " -- " + CADRE_MULTI_WORKER_HELPER + " " +
           path("m") + " " + std::to_string(steps) + " 2>&1";
  }
  // Whether model_dir m has its first checkpoint (whatever the line): when to kill a task.
  std::function<bool(const std::string&)> checkpointed() const {
    return
        [this](const std::string&) { return std::filesystem::exists(path("m") + "/checkpoint"); };
  }
};

// cadre_launch with 2 ps tasks, a chief, 2 workers and an evaluator trains the Fashion-MNIST
// MLP asynchronously; hidden1/kernel is sliced over both ps tasks and checkpointed whole.
TEST_F(PsClusterTest, TwoPsTwoWorkersAChiefAndAnEvaluatorTrainFashionMnist) {
  std::string command = std::string(CADRE_LAUNCH) +
                        " --chief=1 --workers=2 --ps=2 --evaluator=1 -- " + CADRE_FASHION_MNIST +
                        " --model_dir=" + path("m") +
                        " --strategy=parameter_server --max_steps=5000 "
                        "--save_checkpoints_steps=2500 2>&1";
  auto [status, output] = testing::run_command(command);
  ASSERT_EQ(status, 0) << tail(output);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      output, m,
      std::regex(
          R"(\[evaluator:0\] \{"task":"evaluator","model":"mlp","global_step":(\d+),"accuracy":([0-9.]+))")))
      << tail(output);
  EXPECT_GE(std::stoi(m[1]), 5000);
  // Three tasks updating asynchronously land between 0.869 and 0.89 here (one device: 0.88),
  // and 0.850 once in CI, whose parallel tests leave a task descheduled long enough for its
  // gradients to be very stale; chance is 0.1.
  EXPECT_GE(std::stod(m[2]), 0.83) << "test accuracy after " << m[1] << " asynchronous steps";
  EXPECT_NE(output.find("hidden1/kernel/part_0"), std::string::npos) << "the placement plan";
  EXPECT_NE(output.find("hidden1/kernel/part_1"), std::string::npos);
  EXPECT_NE(output.find("strategy parameter_server: 1 replica on cpu:0 on each of 3 workers; "
                        "batch 128 per replica "
                        "(128 per step); gradients: pushed to 2 ps task(s), which apply them "
                        "asynchronously"),
            std::string::npos)
      << "the strategy's line";
  auto reader = latest(path("m"));
  EXPECT_EQ(reader->variables().at("hidden1/kernel").shape, (Shape{784, 256}));
  EXPECT_EQ(reader->variables().at("hidden1/kernel/Adam/m").shape, (Shape{784, 256}));
  EXPECT_EQ(reader->attributes().at("strategy"), "parameter_server");
}

// examples/embedding_classifier on 2 ps tasks: each step moves the rows its batch looks up
// (about 2,000 of them), not the 16 MiB table, and the model learns (chance is 0.5).
TEST_F(PsClusterTest, TheEmbeddingClassifierMovesRowsNotTheTable) {
  std::string command = std::string(CADRE_LAUNCH) +
                        " --chief=1 --workers=1 --ps=2 --evaluator=1 -- " +
                        CADRE_EMBEDDING_CLASSIFIER + " --model_dir=" + path("m") +
                        " --max_steps=1500 --save_checkpoints_steps=1500 --vocab_size=262144"
                        " --examples=200000 2>&1";
  auto [status, output] = testing::run_command(command);
  ASSERT_EQ(status, 0) << tail(output);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      output, m,
      std::regex(
          R"(\[worker:0\] \{.*"table_bytes":(\d+),"pushed_bytes_per_step":(\d+),"pulled_bytes_per_step":(\d+))")))
      << tail(output);
  int64_t table = std::stoll(m[1]), pushed = std::stoll(m[2]), pulled = std::stoll(m[3]);
  EXPECT_EQ(table, 262144 * 16 * 4);
  // 256 examples of 8 ids: at most 2,048 rows of 64 bytes (plus their ids) each way.
  EXPECT_LT(pushed, 2048 * 80 + 8192) << "pushed per step";
  EXPECT_LT(pulled, 2048 * 80 + 8192) << "pulled per step";
  EXPECT_GT(pushed, 1000 * 64) << "pushed per step";
  ASSERT_TRUE(
      std::regex_search(output, m, std::regex(R"(\[evaluator:0\] \{.*"accuracy":([0-9.]+))")))
      << tail(output);
  EXPECT_GT(std::stod(m[1]), 0.65);
}

// A checkpoint saved with 2 ps tasks resumes with 3, then under MultiWorkerMirrored; and one
// saved under MultiWorkerMirrored resumes with 2 ps tasks. Every time the variables, slots
// and step counters carry over whole.
TEST_F(PsClusterTest, CheckpointsMoveBetweenPsCountsAndMultiWorkerMirrored) {
  HelperCluster two_ps(/*workers=*/1, /*ps=*/2);
  two_ps.train(path("a"), 20, path("a1"));
  int64_t first = latest(path("a"))->global_step();
  EXPECT_GE(first, 20);
  HelperCluster three_ps(/*workers=*/0, /*ps=*/3);
  std::string log = three_ps.train(path("a"), 40, path("a2"));
  EXPECT_NE(log.find("resuming from " + path("a") + "/model.ckpt-" + std::to_string(first)),
            std::string::npos)
      << tail(log);
  EXPECT_EQ(latest(path("a"))->attributes().at("strategy"), "parameter_server");
  HelperCluster mirrored(/*workers=*/1, /*ps=*/0);
  log = mirrored.train(path("a"), 60, path("a3"));
  EXPECT_NE(log.find("resuming from"), std::string::npos) << tail(log);
  auto after = latest(path("a"));
  EXPECT_EQ(after->attributes().at("strategy"), "multi_worker_mirrored");
  EXPECT_GE(after->global_step(), 60);

  HelperCluster back_mirrored(1, 0);
  back_mirrored.train(path("b"), 20, path("b1"));
  HelperCluster back_ps(1, 2);
  log = back_ps.train(path("b"), 40, path("b2"));
  EXPECT_NE(log.find("resuming from " + path("b") + "/model.ckpt-20.h5 at step 20"),
            std::string::npos)
      << tail(log);
  auto back = latest(path("b"));
  EXPECT_EQ(back->attributes().at("strategy"), "parameter_server");
  // The same logical variables everywhere, and Adam's counter past the resumed 20 steps.
  ASSERT_EQ(back->variables().size(), after->variables().size());
  for (const auto& [name, info] : after->variables()) {
    ASSERT_TRUE(back->variables().count(name)) << name;
    EXPECT_EQ(back->variables().at(name).shape, info.shape) << name;
  }
  EXPECT_GE(back->read("Adam/iterations").item<int64_t>(), 40);
}

// A worker killed with SIGKILL does not stop the others: the chief still trains to max_steps
// and marks the end of training.
TEST_F(PsClusterTest, AKilledWorkerLeavesTheJobFinishing) {
  HelperCluster cluster(/*workers=*/2, /*ps=*/2);
  for (int i = 0; i < 2; ++i)
    cluster.start("ps", i, path("m"), 600, path("ps") + std::to_string(i));
  pid_t worker0 = cluster.start("worker", 0, path("m"), 600, path("worker0"));
  pid_t worker1 = cluster.start("worker", 1, path("m"), 600, path("worker1"));
  pid_t chief = cluster.start("chief", 0, path("m"), 600, path("chief"));
  auto start = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(path("m") + "/checkpoint") &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(worker1, SIGKILL);
  EXPECT_EQ(wait_for(worker1), 128 + SIGKILL);
  EXPECT_EQ(wait_for(chief), 0) << tail(read_log(path("chief")));
  EXPECT_EQ(wait_for(worker0), 0) << tail(read_log(path("worker0")));
  EXPECT_GE(read_training_finished(path("m")).value_or(0), 600);
}

// Under cadre_launch --max_restarts=1, a worker killed with SIGKILL is restarted alone: it
// rejoins while the chief trains on (the chief is not restarted) and the job finishes.
TEST_F(PsClusterTest, AKilledWorkerIsRestartedAloneAndRejoins) {
  // Paced at 5 ms a step, the chief alone needs 5 s for the 1000 steps: time enough for the
  // worker to be restarted and rejoin however fast the machine (unpaced, a fast machine
  // finished before the worker was back).
  std::string command = "HELPER_STEP_SLEEP_MS=5 " +
                        helper_under_launch("--chief=1 --workers=1 --ps=1 --max_restarts=1", 1000);
  testing::KillTaskOnce kill("worker:0", checkpointed());
  auto [status, output] = testing::run_command(command, std::ref(kill));
  EXPECT_TRUE(kill.killed());
  EXPECT_EQ(status, 0) << tail(output);
  EXPECT_NE(output.find("cadre_launch: worker:0 failed (killed by signal 9); restarting it"),
            std::string::npos)
      << tail(output);
  auto count = [&output = output](const std::string& text) {
    size_t n = 0;
    for (size_t at = output.find(text); at != std::string::npos; at = output.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("started chief:0"), 1u) << tail(output);
  EXPECT_EQ(count("started worker:0"), 2u) << tail(output);
  // The new worker took the chief's step before the end and trained to it.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      output, m, std::regex(R"(\[worker:0\].*taking the chief's global step (\d+))")))
      << tail(output);
  EXPECT_LT(std::stoi(m[1]), 1000);
  EXPECT_NE(output.find(R"([worker:0] {"task":"worker","global_step":)"), std::string::npos)
      << tail(output);
}

// Under cadre_launch --max_restarts=2, a ps task killed with SIGKILL restarts the whole
// cluster (its variables are gone), which resumes from the last checkpoint and finishes.
TEST_F(PsClusterTest, AKilledPsRestartsTheClusterWhichFinishesFromTheLastCheckpoint) {
  std::string command = helper_under_launch("--chief=1 --workers=1 --ps=2 --max_restarts=2", 400);
  testing::KillTaskOnce kill("ps:1", checkpointed());
  auto [status, output] = testing::run_command(command, std::ref(kill));
  EXPECT_TRUE(kill.killed());
  EXPECT_EQ(status, 0) << tail(output);
  EXPECT_NE(output.find("cadre_launch: ps:1 failed (killed by signal 9); restarting the cluster"),
            std::string::npos)
      << tail(output);
  EXPECT_NE(output.find("resuming from"), std::string::npos) << tail(output);
  EXPECT_GE(latest(path("m"))->global_step(), 400);
}

}  // namespace
}  // namespace cadre
