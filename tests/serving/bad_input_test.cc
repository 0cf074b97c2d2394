// Bad requests get TensorFlow Serving's error shape ({"error": "..."}) with a clear message
// and the right status, and the server keeps serving: malformed or deep JSON, wrong shapes
// and dtypes, unknown models, versions and signatures, oversized bodies, slow clients,
// missing tokens, overload.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <thread>

#include "cadre/serving/model_server.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/mini_json.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::http_call;
using testing::JsonParser;

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::export_version(dir_->file("model"), dir_->file("export"), 10, 3);
  }
  static void TearDownTestSuite() { delete dir_; }

  std::unique_ptr<ModelServer> start(ServingOptions options = {}) {
    options.export_base = dir_->file("export");
    options.model_name = "toy";
    options.rest_port = 0;
    options.grpc_port = -1;
    return ModelServer::start(testing::serving_model_fn, options);
  }

  // The error message of a reply, checking its shape.
  static std::string error_of(const testing::HttpReply& reply) {
    auto json = JsonParser::parse(reply.body);
    EXPECT_TRUE(json.has("error")) << reply.body;
    return json.has("error") ? json["error"].string() : "";
  }

  static bool still_serves(int port) {
    auto reply = http_call(port, "POST", "/v1/models/toy:predict",
                           testing::instances_json(testing::serving_examples(1)));
    return reply.status == 200;
  }

  static testing::TempDir* dir_;
};

testing::TempDir* BadInputTest::dir_ = nullptr;

TEST_F(BadInputTest, EachMistakeGetsItsStatusAndAMessageNamingIt) {
  auto server = start();
  int port = server->rest_port();
  struct Case {
    std::string method, target, body;
    int status;
    std::string says;
  };
  std::string deep = std::string(100, '[') + std::string(100, ']');
  std::vector<Case> cases = {
      {"POST", "/v1/models/toy:predict", "{\"instances\": [[1, 2,", 400, "not valid JSON"},
      {"POST", "/v1/models/toy:predict", "{\"instances\":" + deep + "}", 400, "nested deeper"},
      {"POST", "/v1/models/toy:predict", "{\"instances\": [[1, 2, 3]]}", 400, "list of 4 values"},
      {"POST", "/v1/models/toy:predict", "{\"instances\": [[1, 2, \"a\", 4]]}", 400,
       "got a string"},
      {"POST", "/v1/models/toy:predict", "{\"instances\": [{\"y\": [1, 2, 3, 4]}]}", 400,
       "no input 'x'"},
      {"POST", "/v1/models/toy:predict", "{\"rows\": []}", 400, "exactly one of"},
      {"POST", "/v1/models/toy:predict",
       "{\"signature_name\": \"nope\", \"instances\": [[1, 2, 3, 4]]}", 400, "no signature 'nope'"},
      {"POST", "/v1/models/other:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404, "'other'"},
      {"POST", "/v1/models/toy/versions/9:predict", "{\"instances\": [[1, 2, 3, 4]]}", 404,
       "version 9"},
      {"GET", "/v1/models/toy:predict", "", 405, "takes POST"},
      {"POST", "/v1/models/toy:classify", "{\"examples\": []}", 400, "non-empty list"},
      {"GET", "/v2/whatever", "", 404, "Malformed request"},
  };
  for (const Case& c : cases) {
    auto reply = http_call(port, c.method, c.target, c.body);
    EXPECT_EQ(reply.status, c.status) << c.target << " " << c.body << ": " << reply.body;
    EXPECT_NE(error_of(reply).find(c.says), std::string::npos) << reply.body;
  }
  EXPECT_TRUE(still_serves(port));
}

TEST_F(BadInputTest, BodiesPastTheLimitAreRefusedBeforeTheyAreRead) {
  ServingOptions options;
  options.max_request_bytes = 1 << 20;
  auto server = start(options);
  // A 100 MB body announced: refused on its head, nothing read.
  auto reply = testing::http_raw(server->rest_port(),
                                 "POST /v1/models/toy:predict HTTP/1.1\r\n"
                                 "Content-Length: 104857600\r\n\r\n{\"instances\":");
  EXPECT_EQ(reply.status, 413);
  std::string huge(2 << 20, ' ');
  reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", huge);
  EXPECT_EQ(reply.status, 413);
  EXPECT_NE(error_of(reply).find("exceeds the limit"), std::string::npos);
  EXPECT_TRUE(still_serves(server->rest_port()));
}

TEST_F(BadInputTest, ASlowClientIsCutOffAndOthersAreServedMeanwhile) {
  ServingOptions options;
  options.request_timeout_secs = 0.5;
  auto server = start(options);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server->rest_port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  std::string head = "POST /v1/models/toy:predict HTTP/1.1\r\nContent-Le";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  EXPECT_TRUE(still_serves(server->rest_port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  char reply[512] = {};
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ssize_t got = recv(fd, reply, sizeof reply - 1, 0);
  close(fd);
  ASSERT_GT(got, 0);
  EXPECT_EQ(std::string(reply).substr(0, 12), "HTTP/1.1 408");
}

TEST_F(BadInputTest, ABearerTokenIsRequiredWhenSet) {
  ServingOptions options;
  options.bearer_token = "s3cret";
  auto server = start(options);
  auto body = testing::instances_json(testing::serving_examples(1));
  auto reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", body);
  EXPECT_EQ(reply.status, 401);
  reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", body,
                    "Authorization: Bearer wrong\r\n");
  EXPECT_EQ(reply.status, 401);
  reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict", body,
                    "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(reply.status, 200) << reply.body;
}

// Admission itself (examples queued or running) is BatcherTest's; here, its answer over
// HTTP: a request holding more examples than the server admits.
TEST_F(BadInputTest, OverloadIsRefusedWith429) {
  ServingOptions options;
  options.max_queued_examples = 4;
  auto server = start(options);
  auto reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict",
                         testing::instances_json(testing::serving_examples(5)));
  EXPECT_EQ(reply.status, 429);
  EXPECT_NE(error_of(reply).find("overloaded"), std::string::npos) << reply.body;
  EXPECT_TRUE(still_serves(server->rest_port()));
}

}  // namespace
}  // namespace cadre
