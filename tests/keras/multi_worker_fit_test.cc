// fit under MultiWorkerMirroredStrategy with a chief and a worker as two processes on
// 127.0.0.1 (TF_CONFIG each): the same metrics as one process; and a job killed mid-epoch
// and started again with BackupAndRestore ends with the variables of one never killed.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cadre/cadre.h"
#include "tests/keras/fresh_dir.h"
#include "tests/keras/keras_test_data.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre::keras {
namespace {

using cadre::testing::free_port;
using cadre::testing::read_log;
using cadre::testing::wait_for;

pid_t start(const std::string& tf_config, const std::string& dir, const std::string& log,
            const std::string& pace = "") {
  std::vector<std::pair<std::string, std::string>> env{cadre::testing::job_secret_env(),
                                                       {"HELPER_STEP_SLEEP_MS", pace}};
  if (!tf_config.empty()) env.emplace_back("TF_CONFIG", tf_config);
  return cadre::testing::spawn({CADRE_KERAS_FIT_HELPER, dir}, env, log);
}

struct Job {
  pid_t chief, worker;
};

Job start_job(const std::string& dir, const std::string& pace = "") {
  std::string cluster = "\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(free_port()) +
                        "\"], \"worker\": [\"127.0.0.1:" + std::to_string(free_port()) + "\"]}";
  std::filesystem::create_directories(dir);
  return {start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", dir,
                dir + "/chief.log", pace),
          start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", dir,
                dir + "/worker.log", pace)};
}

std::map<std::string, std::vector<double>> final_variables(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::open(dir + "/model.ckpt-30.h5");
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, info] : reader->variables()) {
    if (name.starts_with("dense")) out[name] = reader->read(name).to_vector<double>();
  }
  return out;
}

TEST(MultiWorkerFitTest, TwoWorkersMatchOneProcessAndResumeExactlyAfterAKill) {
  std::string root = testing::fresh_dir("multi_worker");
  // One process.
  std::filesystem::create_directories(root + "/single");
  ASSERT_EQ(wait_for(start("", root + "/single", root + "/single.log")), 0)
      << read_log(root + "/single.log");
  // Two workers, uninterrupted.
  Job job = start_job(root + "/straight");
  EXPECT_EQ(wait_for(job.worker), 0) << read_log(root + "/straight/worker.log");
  EXPECT_EQ(wait_for(job.chief), 0) << read_log(root + "/straight/chief.log");
  auto single = final_variables(root + "/single");
  auto straight = final_variables(root + "/straight");
  ASSERT_EQ(single.size(), straight.size());
  for (const auto& [name, values] : single) {
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_NEAR(values[i], straight[name][i], 1e-4) << name;
    }
  }
  // Two workers killed mid-epoch 2 (after the checkpoint of step 14), then started again.
  std::string dir = root + "/killed";
  job = start_job(dir, "40");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(dir + "/model.ckpt-14.h5") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(job.chief, SIGKILL);
  ::kill(job.worker, SIGKILL);
  wait_for(job.chief);
  wait_for(job.worker);
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.ckpt-14.h5")) << read_log(dir + "/chief.log");
  ASSERT_FALSE(std::filesystem::exists(dir + "/model.ckpt-30.h5"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/backup/fit_state"));
  job = start_job(dir);
  EXPECT_EQ(wait_for(job.worker), 0) << read_log(dir + "/worker.log");
  EXPECT_EQ(wait_for(job.chief), 0) << read_log(dir + "/chief.log");
  EXPECT_NE(read_log(dir + "/chief.log").find("BackupAndRestore: resuming"), std::string::npos);
  auto resumed = final_variables(dir);
  for (const auto& [name, values] : straight) {
    EXPECT_EQ(values, resumed[name]) << name;
  }
}

}  // namespace
}  // namespace cadre::keras
