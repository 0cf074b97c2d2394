// Versions as training exports them: a new version is served within 2 s (TensorFlow
// Serving's default 1 s polling) while clients keep sending, with no failed request across
// the swap; a damaged or half-written version is refused and the current one keeps
// serving; the version policy picks what is served.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/estimator/predictor.h"
#include "cadre/serving/model_server.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/mini_json.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;
using testing::http_call;
using testing::JsonParser;

class VersionSwapTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelServer> start(const std::string& policy = "latest", double poll_secs = 1) {
    ServingOptions options;
    options.export_base = dir_.file("export");
    options.model_name = "toy";
    options.rest_port = 0;
    options.grpc_port = -1;
    options.poll_secs = poll_secs;
    options.version_policy = VersionPolicy::parse(policy);
    return ModelServer::start(testing::serving_model_fn, options);
  }

  testing::TempDir dir_;
};

TEST_F(VersionSwapTest, ANewVersionIsServedWithinTwoSecondsWithNoFailedRequest) {
  testing::export_version(dir_.file("model"), dir_.file("export"), 10, 1);
  std::string next = testing::export_version(dir_.file("model"), dir_.file("later"), 60, 2);
  auto server = start();
  ASSERT_EQ(server->versions(), std::vector<int64_t>{1});

  std::atomic<bool> stop{false};
  std::atomic<int> sent{0}, failed{0};
  std::string body = testing::instances_json(testing::serving_examples(2, 50));
  std::vector<std::thread> clients;
  auto deadline = Clock::now() + std::chrono::seconds(30);  // bounds the loop whatever happens
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      while (!stop && Clock::now() < deadline) {
        auto reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", body);
        ++sent;
        if (reply.status != 200) ++failed;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::filesystem::rename(next, dir_.file("export/2"));  // as an exporter publishes
  auto published = Clock::now();
  double served_after = -1;
  while (Clock::now() - published < std::chrono::seconds(5)) {
    auto status = JsonParser::parse(http_call(server->rest_port(), "GET", "/v1/models/toy").body);
    if (status["model_version_status"].array()[0]["version"].string() == "2") {
      served_after = std::chrono::duration<double>(Clock::now() - published).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& client : clients) client.join();

  EXPECT_GE(served_after, 0) << "version 2 was not served within 5 s";
  EXPECT_LT(served_after, 2.0);
  EXPECT_EQ(failed, 0) << "of " << sent << " requests";
  EXPECT_GT(sent, 20);
  EXPECT_EQ(server->versions(), std::vector<int64_t>{2});
  Tensor x = testing::serving_examples(2, 50);
  auto expected = Predictor::load(dir_.file("export/2"), testing::serving_model_fn)
                      ->predict({{"x", x}})
                      .at("probabilities")
                      .to_vector<float>();
  auto reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", body);
  auto rows = JsonParser::parse(reply.body)["predictions"].array();
  EXPECT_NEAR(rows[1]["probabilities"].array()[2].number(), expected[5], 1e-6);
}

TEST_F(VersionSwapTest, ADamagedOrHalfWrittenVersionIsRefusedAndTheCurrentKeepsServing) {
  std::string first = testing::export_version(dir_.file("model"), dir_.file("export"), 10, 1);
  auto server = start("latest", 0.1);
  // Half-written: the description without the variables. Damaged: variables cut short.
  std::filesystem::create_directory(dir_.file("export/2"));
  std::filesystem::copy_file(first + "/export.json", dir_.file("export/2/export.json"));
  std::filesystem::copy(first, dir_.file("export/3"));
  std::filesystem::resize_file(dir_.file("export/3/variables.h5"),
                               std::filesystem::file_size(first + "/variables.h5") / 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(server->versions(), std::vector<int64_t>{1});
  auto reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict",
                         testing::instances_json(testing::serving_examples(1)));
  EXPECT_EQ(reply.status, 200) << reply.body;
  // Completed later (a copy finishing), the version is taken.
  std::filesystem::copy_file(first + "/variables.h5", dir_.file("export/2/variables.h5"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(server->versions(), std::vector<int64_t>{2});
}

TEST_F(VersionSwapTest, ThePolicyChoosesTheVersionsServed) {
  testing::export_version(dir_.file("model"), dir_.file("export"), 10, 1);
  testing::export_version(dir_.file("model"), dir_.file("export"), 20, 2);
  testing::export_version(dir_.file("model"), dir_.file("export"), 30, 3);
  EXPECT_EQ(start("latest")->versions(), std::vector<int64_t>{3});
  EXPECT_EQ(start("latest:2")->versions(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(start("all")->versions(), (std::vector<int64_t>{1, 2, 3}));
  auto server = start("specific:1,3");
  EXPECT_EQ(server->versions(), (std::vector<int64_t>{1, 3}));
  auto body = testing::instances_json(testing::serving_examples(1));
  EXPECT_EQ(
      http_call(server->rest_port(), "POST", "/v1/models/toy/versions/1:predict", body).status,
      200);
  EXPECT_EQ(
      http_call(server->rest_port(), "POST", "/v1/models/toy/versions/2:predict", body).status,
      404);
  for (const char* bad : {"newest", "latest:0", "specific:", "specific:1,x"}) {
    EXPECT_THROW(VersionPolicy::parse(bad), InvalidArgumentError) << bad;
  }
}

TEST_F(VersionSwapTest, AServerStartedBeforeAnyExportWaitsForTheFirst) {
  auto server = start("latest", 0.1);
  auto reply = http_call(server->rest_port(), "GET", "/v1/models/toy");
  EXPECT_EQ(reply.status, 404);
  EXPECT_NE(reply.body.find("no version"), std::string::npos) << reply.body;
  testing::export_version(dir_.file("model"), dir_.file("export"), 10, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(server->versions(), std::vector<int64_t>{1});
}

}  // namespace
}  // namespace cadre
