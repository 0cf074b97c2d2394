// What the multi-worker tests share (multi_worker_test.cc, multi_worker_failure_test.cc):
// multi_worker_helper started as a task, the cluster of a chief and a worker, and the
// MultiWorkerTest fixture with its scenarios.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cadre/checkpoint/reader.h"
#include "cadre/io/event_file.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre::testing::multi_worker {

inline pid_t start(const std::string& tf_config, const std::string& model_dir, int steps,
                   const std::string& log, const char* strategy = "", const char* input = "",
                   const char* seed = "",
                   std::vector<std::pair<std::string, std::string>> more_env = {}) {
  std::vector<std::pair<std::string, std::string>> env{{"HELPER_STRATEGY", strategy},
                                                       {"HELPER_INPUT", input},
                                                       {"HELPER_SEED", seed},
                                                       job_secret_env()};
  env.insert(env.end(), more_env.begin(), more_env.end());
  if (!tf_config.empty()) env.emplace_back("TF_CONFIG", tf_config);
  return spawn({CADRE_MULTI_WORKER_HELPER, model_dir, std::to_string(steps)}, env, log);
}

inline std::string cluster_json(int chief_port, int worker_port) {
  return "\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(chief_port) +
         "\"], \"worker\": [\"127.0.0.1:" + std::to_string(worker_port) + "\"]}";
}

class MultiWorkerTest : public TempDirTest {
 protected:
  // A chief whose training throws at step 30 (with `chief_env` besides) and a worker, in
  // model_dir "m<transport>", over `transport` ("" for shared memory, or "gloo").
  std::pair<pid_t, pid_t> start_failing_chief(
      const std::string& transport, std::vector<std::pair<std::string, std::string>> chief_env) {
    std::string dir = path("m" + transport);
    std::string cluster = cluster_json(free_port(), free_port());
    chief_env.emplace_back("HELPER_TRANSPORT", transport);
    chief_env.emplace_back("HELPER_FAIL_AT_STEP", "30");
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", dir, 1000000,
                        path("chief.log"), "", "", "", chief_env);
    pid_t worker =
        start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", dir, 1000000,
              path("worker.log"), "", "", "", {{"HELPER_TRANSPORT", transport}});
    return {chief, worker};
  }

  // A chief and a worker train to step 20 in `dir`; every variable then equals a single
  // process's after 20 steps of the same global batches.
  void expect_two_workers_match_one_process(
      const std::string& dir, const char* input, const char* worker_seed = "",
      std::vector<std::pair<std::string, std::string>> env = {}) {
    ASSERT_EQ(wait_for(start("", path("single"), 20, path("single.log"), "", "", "", env)), 0)
        << read_log(path("single.log"));
    std::string cluster = cluster_json(free_port(), free_port());
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", dir, 20,
                        path("chief.log"), "", input, "", env);
    pid_t worker = start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", dir, 20,
                         path("worker.log"), "", input, worker_seed, env);
    EXPECT_EQ(wait_for(worker), 0) << read_log(path("worker.log"));
    EXPECT_EQ(wait_for(chief), 0) << read_log(path("chief.log"));

    auto single = checkpoint::CheckpointReader::open(path("single") + "/model.ckpt-20.h5");
    auto multi = checkpoint::CheckpointReader::open(dir + "/model.ckpt-20.h5");
    ASSERT_EQ(single->variables().size(), multi->variables().size());
    for (const auto& [name, info] : single->variables()) {
      std::vector<double> a = single->read(name).to_vector<double>();
      std::vector<double> b = multi->read(name).to_vector<double>();
      ASSERT_EQ(a.size(), b.size()) << name;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 1e-5) << name << "[" << i << "]";
      }
    }
    // Only the chief wrote checkpoints and summaries (the worker's copy is the chief's files).
    EXPECT_EQ(multi->attributes().at("strategy"), "multi_worker_mirrored");
    // The chief's training loss is the global batch's, as one process computes it, not
    // the loss of its own half.
    std::map<int64_t, float> one = training_losses(path("single")), two = training_losses(dir);
    ASSERT_FALSE(one.empty());
    EXPECT_EQ(one.size(), two.size());
    for (const auto& [step, loss] : one) {
      ASSERT_TRUE(two.count(step)) << "no loss for step " << step;
      EXPECT_NEAR(two[step], loss, 1e-5 * std::abs(loss)) << "step " << step;
    }
  }

  // Starts a chief and a worker training in model_dir "m" (emptied first) and returns
  // their pids once the chief has saved step 10.
  std::pair<pid_t, pid_t> start_training(
      const std::vector<std::pair<std::string, std::string>>& env) {
    std::filesystem::remove_all(path("m"));
    std::string cluster = cluster_json(free_port(), free_port());
    pid_t chief = start("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})", path("m"),
                        1000000, path("chief.log"), "", "", "", env);
    pid_t worker = start("{" + cluster + R"(, "task": {"type": "worker", "index": 0}})", path("m"),
                         1000000, path("worker.log"), "", "", "", env);
    auto start_time = std::chrono::steady_clock::now();
    while (!std::filesystem::exists(path("m") + "/model.ckpt-10.h5") &&
           std::chrono::steady_clock::now() - start_time < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return {chief, worker};
  }

  // A chief and a worker train until the worker is SIGKILLed: the chief names it and exits
  // with status 1 within `seconds`, without waiting for the heartbeat timeout (5 s).
  void expect_a_worker_that_dies_is_named_and_the_chief_stops(
      const std::vector<std::pair<std::string, std::string>>& env, double seconds) {
    auto [chief, worker] = start_training(env);
    ::kill(worker, SIGKILL);
    wait_for(worker);
    auto killed = std::chrono::steady_clock::now();
    EXPECT_EQ(wait_for(chief), 1);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    EXPECT_LT(took, seconds);
    std::string log = read_log(path("chief.log"));
    // Named by the collective that lost it: by its pid over shared memory, as the peer
    // whose connection broke over Gloo.
    bool named = log.find("worker:0 (rank 1, pid") != std::string::npos ||
                 log.find("a peer is gone (worker:0)") != std::string::npos;
    EXPECT_TRUE(named) << tail(log, 2000);
  }

  // The "loss" summaries of model_dir's training event files, by step.
  static std::map<int64_t, float> training_losses(const std::string& model_dir) {
    std::map<int64_t, float> losses;
    for (const auto& entry : std::filesystem::directory_iterator(model_dir)) {
      if (entry.path().filename().string().rfind("events.out.tfevents", 0) != 0) continue;
      for (const io::Event& event : io::read_event_file(entry.path().string())) {
        for (const io::SummaryValue& v : event.values) {
          if (v.tag == "loss" && v.scalar) losses[event.step] = *v.scalar;
        }
      }
    }
    return losses;
  }
};

}  // namespace cadre::testing::multi_worker
