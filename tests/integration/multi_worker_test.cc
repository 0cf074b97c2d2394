// A chief and a worker as two processes on 127.0.0.1 (TF_CONFIG each, the coordination
// service on the chief's port, Gloo between them) train as one process does on the same
// global batch; the chief alone writes model_dir (a job that fails:
// multi_worker_failure_test.cc).
#include "tests/integration/multi_worker_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::free_port;
using testing::read_log;
using testing::wait_for;
using testing::multi_worker::cluster_json;
using testing::multi_worker::MultiWorkerTest;
using testing::multi_worker::start;

// Gradient buckets summed while the backward pass runs give the same bits as the same
// buckets summed after it, over Gloo's ring (whose sums depend on where an element sits in
// its buffer, so that only the same buckets can agree) with buckets small enough that
// every variable has its own, and kernels in pieces of 64 bytes (built by rows while the
// pieces before are summed).
TEST_F(MultiWorkerTest, OverlappedBucketsGiveTheSameBitsAsBucketsAfterTheBackwardPass) {
  std::map<std::string, std::vector<double>> variables[2];
  for (int overlap = 0; overlap < 2; ++overlap) {
    std::string dir = path(overlap ? "overlap" : "after");
    std::string cluster = cluster_json(free_port(), free_port());
    std::vector<std::pair<std::string, std::string>> env{{"HELPER_TRANSPORT", "gloo"},
                                                         {"HELPER_OVERLAP", overlap ? "1" : "0"},
                                                         {"HELPER_BUCKET_BYTES", "256"},
                                                         {"HELPER_PIECE_BYTES", "64"}};
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", dir, 20,
                        path("chief.log"), "", "", "", env);
    pid_t worker = start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", dir, 20,
                         path("worker.log"), "", "", "", env);
    ASSERT_EQ(wait_for(worker), 0) << read_log(path("worker.log"));
    ASSERT_EQ(wait_for(chief), 0) << read_log(path("chief.log"));
    EXPECT_NE(read_log(path("chief.log")).find("Gloo all-reduce across 2 workers"),
              std::string::npos)
        << read_log(path("chief.log"));
    EXPECT_NE(read_log(path("chief.log")).find("([8, 16]) is summed in 8 pieces of up to 1 rows"),
              std::string::npos)
        << read_log(path("chief.log"));
    auto reader = checkpoint::CheckpointReader::open(dir + "/model.ckpt-20.h5");
    for (const auto& [name, info] : reader->variables()) {
      variables[overlap][name] = reader->read(name).to_vector<double>();
    }
  }
  ASSERT_FALSE(variables[0].empty());
  EXPECT_EQ(variables[0], variables[1]);
}

// An embedding's gradient crosses the workers as the rows each looked up (gathered, not a
// dense table summed), with the same result as one process.
TEST_F(MultiWorkerTest, EmbeddingRowsAreGatheredAcrossWorkersAndMatchOneProcess) {
  expect_two_workers_match_one_process(path("multi"), "", "", {{"HELPER_EMBEDDING", "1"}});
  EXPECT_NE(read_log(path("chief.log")).find("is sparse: it is gathered across workers as rows"),
            std::string::npos)
      << read_log(path("chief.log"));
}

TEST_F(MultiWorkerTest, AChiefAndAWorkerTrainAsOneProcessOnTheSameGlobalBatch) {
  expect_two_workers_match_one_process(path("multi"), "");
  EXPECT_NE(read_log(path("worker.log"))
                .find("input of worker 1 of 2: the input_fn shards by itself: shard(2, 1)"),
            std::string::npos)
      << read_log(path("worker.log"));
}

// Tasks started by hand with TF_CONFIG alone (no job secret, as a user first tries) share
// the user's default secret and train together; a task with another home (another user's
// secret) is refused at registration and says where its secret came from.
TEST_F(MultiWorkerTest, TasksWithTfConfigAloneShareTheUsersDefaultSecret) {
  std::string cluster = cluster_json(free_port(), free_port());
  auto task = [&](const std::string& type, const std::string& home, const std::string& log) {
    std::filesystem::create_directories(home);
    std::string tf_config = "{" + cluster + R"(, "task": {"type": ")" + type + R"(", "index": 0}})";
    return testing::spawn({CADRE_MULTI_WORKER_HELPER, path("m"), "20"},
                          {{"TF_CONFIG", tf_config}, {"HOME", home}, {"CADRE_JOB_SECRET", ""}},
                          log);
  };
  pid_t chief = task("chief", path("home"), path("chief.log"));
  pid_t stranger = task("worker", path("other"), path("stranger.log"));
  EXPECT_EQ(wait_for(stranger), 1) << read_log(path("stranger.log"));
  EXPECT_NE(read_log(path("stranger.log"))
                .find("this task's secret comes from " + path("other") +
                      "/.cadre/job_secret (this user's default)"),
            std::string::npos)
      << read_log(path("stranger.log"));
  pid_t worker = task("worker", path("home"), path("worker.log"));
  EXPECT_EQ(wait_for(worker), 0) << read_log(path("worker.log"));
  EXPECT_EQ(wait_for(chief), 0) << read_log(path("chief.log"));
  EXPECT_TRUE(std::filesystem::exists(path("m") + "/model.ckpt-20.h5"));
  auto permissions = std::filesystem::status(path("home") + "/.cadre/job_secret").permissions();
  EXPECT_EQ(permissions, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// One worker is a legitimate MultiWorkerMirrored job (TensorFlow runs it): a chief alone, with
// no job secret anywhere (as a cluster of one reads none), trains and ends with its result
// line, contacting no one: no coordination service, and no default secret made.
TEST_F(MultiWorkerTest, AChiefAloneTrainsWithoutASecretOrAService) {
  std::filesystem::create_directories(path("home"));
  std::string tf_config = R"({"cluster": {"chief": ["127.0.0.1:)" + std::to_string(free_port()) +
                          R"("]}, "task": {"type": "chief", "index": 0}})";
  testing::CommandResult run = testing::run_command(
      "TF_CONFIG='" + tf_config + "' HOME=" + path("home") +
      " CADRE_JOB_SECRET= CADRE_JOB_SECRET_FILE= CADRE_INSECURE= CADRE_NUM_THREADS=1"
      " timeout 120 " CADRE_FASHION_MNIST " --model_dir=" +
      path("m") +
      " --strategy=multi_worker_mirrored --max_steps=20 --save_checkpoints_steps=10"
      " --eval_steps=1 --batch_size=32 2>&1");
  ASSERT_EQ(run.status, 0) << testing::tail(run.output);
  EXPECT_NE(run.output.find("MultiWorkerMirroredStrategy: worker 0 of 1 (chief:0)"),
            std::string::npos)
      << testing::tail(run.output);
  EXPECT_NE(run.output.find(R"({"task":"chief","model":"mlp","global_step":20)"), std::string::npos)
      << testing::tail(run.output);
  EXPECT_EQ(run.output.find("coordination service"), std::string::npos)
      << testing::tail(run.output);
  EXPECT_FALSE(std::filesystem::exists(path("home") + "/.cadre"));
}

// An input_fn that does not shard is divided by auto-sharding (DATA: the pipeline reads no
// files), each worker taking alternate per-replica batches, which together are the global
// batches of one process.
TEST_F(MultiWorkerTest, AnUnshardedInputIsAutoShardedByData) {
  expect_two_workers_match_one_process(path("multi"), "unsharded");
  EXPECT_NE(read_log(path("chief.log"))
                .find("input of worker 0 of 2: DATA: elements 0, 2, 4, ... of the 'batch' stage"),
            std::string::npos)
      << read_log(path("chief.log"));
}

// A worker with another seed still starts from the chief's variables (broadcast when they
// are created), so the pair trains as one process with the chief's seed.
TEST_F(MultiWorkerTest, WorkersStartFromTheChiefsVariables) {
  expect_two_workers_match_one_process(path("multi"), "", /*worker_seed=*/"7");
}

// Two workers save, one process with Mirrored on 2 CPU devices resumes, and the reverse: the
// global step, variables and optimizer slots carry over (the input position is each
// worker's shard, which one pipeline can only approximate: the losses are compared loosely).
TEST_F(MultiWorkerTest, TwoWorkersAndOneMirroredProcessResumeEachOther) {
  ASSERT_EQ(wait_for(start("", path("ref"), 20, path("ref.log"))), 0);
  auto reference = checkpoint::CheckpointReader::open(path("ref") + "/model.ckpt-20.h5");
  auto two_workers = [&](const std::string& dir, int steps) {
    std::string cluster = cluster_json(free_port(), free_port());
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", dir, steps,
                        path("chief.log"));
    pid_t worker = start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", dir, steps,
                         path("worker.log"));
    EXPECT_EQ(wait_for(worker), 0) << read_log(path("worker.log"));
    EXPECT_EQ(wait_for(chief), 0) << read_log(path("chief.log"));
  };
  // 2 workers -> Mirrored(2) in one process: variables and slots carry over, the input of
  // two shards cannot become one pipeline's position, so it starts over.
  two_workers(path("a"), 10);
  ASSERT_EQ(wait_for(start("", path("a"), 20, path("a.log"), "mirrored2")), 0)
      << read_log(path("a.log"));
  EXPECT_NE(
      read_log(path("a.log")).find("resuming from " + path("a") + "/model.ckpt-10.h5 at step 10"),
      std::string::npos);
  // Mirrored(2) in one process -> 2 workers.
  ASSERT_EQ(wait_for(start("", path("b"), 10, path("b.log"), "mirrored2")), 0);
  two_workers(path("b"), 20);
  EXPECT_NE(read_log(path("chief.log"))
                .find("resuming from " + path("b") + "/model.ckpt-10.h5 at step 10"),
            std::string::npos);
  for (const std::string& dir : {path("a"), path("b")}) {
    auto resumed = checkpoint::CheckpointReader::open(dir + "/model.ckpt-20.h5");
    EXPECT_EQ(resumed->global_step(), 20);
    ASSERT_EQ(resumed->variables().size(), reference->variables().size()) << dir;
    for (const auto& [name, info] : reference->variables()) {
      std::vector<double> a = reference->read(name).to_vector<double>();
      std::vector<double> b = resumed->read(name).to_vector<double>();
      ASSERT_EQ(a.size(), b.size()) << name;
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      // The variables carry over (the resume lines above; CrossStrategyTest checks them bit
      // for bit); the input starts over (one pipeline became two or the reverse), as
      // TensorFlow's does at every resume: 0.10 here against the uninterrupted run. The bound
      // only catches a diverged run.
      EXPECT_LT(worst, 0.25) << dir << " " << name;
    }
  }
  for (const char* log : {"a.log", "chief.log"}) {
    EXPECT_NE(read_log(path(log)).find("every worker reads its new shard from the start"),
              std::string::npos)
        << log << ": the re-sharding is logged";
  }
}

// A worker whose model_dir lacks the chief's checkpoints (a machine of its own) resumes
// at the chief's step with the chief's variables instead of starting over.
TEST_F(MultiWorkerTest, AWorkerThatCannotSeeTheCheckpointsTakesTheChiefsStep) {
  auto run = [&](const std::string& worker_dir, int steps) {
    std::string cluster = cluster_json(free_port(), free_port());
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", path("m"),
                        steps, path("chief.log"));
    pid_t worker = start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", worker_dir,
                         steps, path("worker.log"));
    EXPECT_EQ(wait_for(worker), 0) << read_log(path("worker.log"));
    EXPECT_EQ(wait_for(chief), 0) << read_log(path("chief.log"));
  };
  run(path("m"), 10);
  run(path("elsewhere"), 20);
  EXPECT_NE(read_log(path("worker.log")).find("taking the chief's global step 10"),
            std::string::npos)
      << read_log(path("worker.log"));
  EXPECT_EQ(checkpoint::CheckpointReader::open(path("m") + "/model.ckpt-20.h5")->global_step(), 20);
  EXPECT_FALSE(std::filesystem::exists(path("m") + "/model.ckpt-30.h5"));
  // Started again when the chief is already at max_steps: the worker learns so from the
  // chief and neither trains nor waits for the other.
  auto again = std::chrono::steady_clock::now();
  run(path("elsewhere"), 20);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count(), 30);
  EXPECT_NE(read_log(path("worker.log")).find("has already reached max_steps 20"),
            std::string::npos)
      << read_log(path("worker.log"));
}

}  // namespace
}  // namespace cadre
