// Strategy::reduce and Strategy::gather under MultiWorkerMirrored span every worker, as
// tf.distribute's do: 2 workers with 2 replicas each, and 3 workers with one, as processes
// on 127.0.0.1 (cross_worker_helper).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/job_secret.h"
#include "tests/support/mini_json.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::Json;
using testing::JsonParser;

class CrossWorkerTest : public testing::TempDirTest {
 protected:
  // Runs `workers` tasks (a chief and workers-1 workers) with `devices` each; returns each
  // task's JSON line.
  std::vector<Json> run(int workers, const std::string& devices) {
    std::string cluster =
        "\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(testing::free_port()) + "\"]";
    if (workers > 1) {
      cluster += ", \"worker\": [";
      for (int w = 1; w < workers; ++w) {
        cluster += (w > 1 ? ", \"127.0.0.1:" : "\"127.0.0.1:") +
                   std::to_string(testing::free_port()) + "\"";
      }
      cluster += "]";
    }
    cluster += "}";
    std::vector<pid_t> pids;
    for (int w = 0; w < workers; ++w) {
      std::string task = w == 0 ? R"({"type": "chief", "index": 0})"
                                : R"({"type": "worker", "index": )" + std::to_string(w - 1) + "}";
      pids.push_back(testing::spawn({CADRE_CROSS_WORKER_HELPER, path("out" + std::to_string(w))},
                                    {{"TF_CONFIG", "{" + cluster + ", \"task\": " + task + "}"},
                                     {"HELPER_DEVICES", devices},
                                     testing::job_secret_env()},
                                    path("log" + std::to_string(w))));
    }
    std::vector<Json> results;
    for (int w = 0; w < workers; ++w) {
      EXPECT_EQ(testing::wait_for(pids[w], 120), 0) << read_file(path("log" + std::to_string(w)));
      results.push_back(JsonParser::parse(read_file(path("out" + std::to_string(w)))));
    }
    return results;
  }

  // What every task must print: replica g of R holds [g+1, 10(g+1)] with weight g+1, and
  // g+1 rows of g.
  static void expect_job_wide(const std::vector<Json>& results, int replicas) {
    double sum = 0, weighted = 0;
    std::vector<double> rows;
    for (int g = 0; g < replicas; ++g) {
      sum += g + 1;
      weighted += (g + 1.0) * (g + 1.0);
      for (int i = 0; i <= g; ++i) rows.push_back(g);
    }
    for (size_t w = 0; w < results.size(); ++w) {
      const Json& r = results[w];
      EXPECT_EQ(r["worker"].number(), w);
      ASSERT_EQ(r["sum"].array().size(), 2u);
      EXPECT_DOUBLE_EQ(r["sum"].array()[0].number(), sum) << "worker " << w;
      EXPECT_DOUBLE_EQ(r["sum"].array()[1].number(), 10 * sum) << "worker " << w;
      EXPECT_NEAR(r["mean"].array()[0].number(), weighted / sum, 1e-5) << "worker " << w;
      EXPECT_NEAR(r["mean"].array()[1].number(), 10 * weighted / sum, 1e-4) << "worker " << w;
      std::vector<double> gathered;
      for (const Json& v : r["gathered"].array()) gathered.push_back(v.number());
      EXPECT_EQ(gathered, rows) << "worker " << w;
    }
  }
};

TEST_F(CrossWorkerTest, TwoWorkersOfTwoReplicasReduceAndGatherEveryReplica) {
  expect_job_wide(run(2, "cpu:0,cpu:1"), 4);
}

TEST_F(CrossWorkerTest, ThreeWorkersReduceAndGatherEveryReplica) {
  expect_job_wide(run(3, "cpu:0"), 3);
}

}  // namespace
}  // namespace cadre
