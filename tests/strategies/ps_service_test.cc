// The parameter-server service on 127.0.0.1 with its client in this process: what travels
// over gRPC (requests reach the shard, its errors come back with their codes), message
// limits on either side, and the addresses that fail named.
#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/tensor_data.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

using testing::create_request;
using testing::free_port;
using testing::pull_request;

class ParameterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ps::ServerOptions options;
    options.max_message_bytes = 1 << 20;
    options.security = testing::test_security();
    server_ = ps::ParameterServer::start("127.0.0.1:0", options);
    ps::ClientOptions client;
    client.security = testing::test_security();
    client.rpc_timeout_seconds = 20;
    client_ = std::make_unique<ps::PsClient>(0, server_->address(), client);
    client_->wait_until_ready(10);
  }
  std::unique_ptr<ps::ParameterServer> server_;
  std::unique_ptr<ps::PsClient> client_;
};

TEST_F(ParameterServerTest, CallsReachTheShardAndItsErrorsKeepTheirCodes) {
  Tensor value = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  client_->create(create_request("w", &value, Shape{2, 2}));
  EXPECT_EQ(ps::from_proto(client_->pull(pull_request("w")).values(0), "w").to_vector<float>(),
            value.to_vector<float>());
  EXPECT_EQ(client_->global_step(12, 10), 12);
  EXPECT_EQ(client_->global_step(std::nullopt, 10), 12);
  try {
    client_->create(create_request("w", nullptr, Shape{4}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("ps:0 (" + server_->address() + ")"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("exists as float32 [2, 2]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(client_->pull(pull_request("nobody")), NotFoundError);
  EXPECT_GT(client_->bytes_sent(), 0);
  EXPECT_GT(client_->bytes_pulled(), 0);
}

// Callers cut their requests to fit (message_budget.h): one that does not is a bug in
// Cadre, named with the variable, not advice to the user.
TEST_F(ParameterServerTest, OversizedMessagesAreClearErrors) {
  // Over the client's limit: refused before it is sent.
  ps::ClientOptions small;
  small.max_message_bytes = 1000;
  small.security = testing::test_security();
  ps::PsClient limited(0, server_->address(), small);
  Tensor big = Tensor::zeros(Shape{1000});
  try {
    limited.create(create_request("big", &big, Shape{1000}));
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("creating variable 'big'"), std::string::npos) << message;
    EXPECT_NE(message.find("over the message limit of 1000"), std::string::npos) << message;
    EXPECT_EQ(message.find("partition"), std::string::npos) << message;
  }
  // Over the server's (1 MiB): its answer would be too large.
  Tensor large = Tensor::zeros(Shape{300000});
  ps::ClientOptions roomy;
  roomy.max_message_bytes = 4 << 20;
  roomy.security = testing::test_security();
  ps::PsClient generous(0, server_->address(), roomy);
  EXPECT_THROW(generous.create(create_request("large", &large, Shape{300000})),
               ResourceExhaustedError);
}

TEST(ParameterServerErrorsTest, AnAddressThatNeverAnswersAndAPortInUseAreNamed) {
  std::string nobody = "127.0.0.1:" + std::to_string(free_port());
  ps::ClientOptions options;
  options.security = testing::test_security();
  ps::PsClient client(1, nobody, options);
  try {
    client.wait_until_ready(1);
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("ps:1 (" + nobody + ") did not answer within 1 s"),
              std::string::npos)
        << e.what();
  }
  ps::ServerOptions server;
  server.security = testing::test_security();
  auto first = ps::ParameterServer::start("127.0.0.1:0", server);
  try {
    ps::ParameterServer::start(first->address(), server);
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(first->address()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cadre
