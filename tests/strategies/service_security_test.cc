// The services of a cluster on 127.0.0.1 facing strangers: every method of the coordination
// service, of a parameter server and of a coordinator-mode worker's step service refuses a caller
// without the job's token (the methods are taken from the services' descriptors, so a method added
// later is covered), and says so in the log; a bind host is obeyed; a cluster without a secret,
// or with TLS files it cannot read, says what to set (the requests themselves:
// service_requests_test.cc).
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "strategies/cluster/coordination.grpc.pb.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/cluster/step_server.h"
#include "strategies/cluster/step_service.grpc.pb.h"
#include "strategies/ps/ps.grpc.pb.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/tensor_data.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"
#include "tests/support/log_capture.h"

namespace cadre {
namespace {

namespace pb = coordination;

constexpr char kTokenKey[] = "x-cadre-job-token";

// Calls every method of a service (by name) with an empty request.
using CallByName = std::function<grpc::Status(const std::string& method, grpc::ClientContext&)>;

// The status of every method of `service` when called with `token` ("" for none).
std::map<std::string, grpc::StatusCode> statuses(const std::string& service,
                                                 const std::string& token, const CallByName& call) {
  const auto* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  EXPECT_NE(descriptor, nullptr) << service;
  std::map<std::string, grpc::StatusCode> result;
  for (int m = 0; descriptor && m < descriptor->method_count(); ++m) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!token.empty()) context.AddMetadata(kTokenKey, token);
    result[descriptor->method(m)->name()] =
        call(descriptor->method(m)->name(), context).error_code();
  }
  return result;
}

CallByName coordination_calls(pb::Coordination::Stub& stub) {
  return [&stub](const std::string& method, grpc::ClientContext& context) -> grpc::Status {
    if (method == "Register") {
      pb::RegisterRequest request;
      pb::RegisterResponse response;
      return stub.Register(&context, request, &response);
    }
    if (method == "Heartbeat") {
      pb::HeartbeatResponse response;
      return stub.Heartbeat(&context, pb::HeartbeatRequest(), &response);
    }
    if (method == "SetKey") {
      pb::SetKeyResponse response;
      return stub.SetKey(&context, pb::SetKeyRequest(), &response);
    }
    if (method == "GetKey") {
      pb::GetKeyResponse response;
      return stub.GetKey(&context, pb::GetKeyRequest(), &response);
    }
    if (method == "Barrier") {
      pb::BarrierResponse response;
      return stub.Barrier(&context, pb::BarrierRequest(), &response);
    }
    if (method == "ReportError") {
      pb::ReportErrorResponse response;
      return stub.ReportError(&context, pb::ReportErrorRequest(), &response);
    }
    return {grpc::StatusCode::INTERNAL, "the test does not know method " + method};
  };
}

CallByName step_calls(steps::StepService::Stub& stub) {
  return [&stub](const std::string& method, grpc::ClientContext& context) -> grpc::Status {
    if (method == "RunUnit") {
      steps::RunUnitRequest request;
      request.set_unit(1);
      request.set_steps(1);
      steps::RunUnitResponse response;
      return stub.RunUnit(&context, request, &response);
    }
    if (method == "Finish") {
      steps::FinishResponse response;
      return stub.Finish(&context, steps::FinishRequest(), &response);
    }
    return {grpc::StatusCode::INTERNAL, "the test does not know method " + method};
  };
}

CallByName ps_calls(ps::ParameterServerService::Stub& stub) {
  return [&stub](const std::string& method, grpc::ClientContext& context) -> grpc::Status {
    if (method == "Create") {
      ps::CreateResponse response;
      return stub.Create(&context, ps::CreateRequest(), &response);
    }
    if (method == "Pull") {
      ps::PullResponse response;
      return stub.Pull(&context, ps::PullRequest(), &response);
    }
    if (method == "Push") {
      ps::PushResponse response;
      return stub.Push(&context, ps::PushRequest(), &response);
    }
    if (method == "GlobalStep") {
      ps::GlobalStepResponse response;
      return stub.GlobalStep(&context, ps::GlobalStepRequest(), &response);
    }
    if (method == "Read") {
      ps::ReadResponse response;
      return stub.Read(&context, ps::ReadRequest(), &response);
    }
    if (method == "Units") {
      ps::UnitsResponse response;
      return stub.Units(&context, ps::UnitsRequest(), &response);
    }
    if (method == "PlannedStop") {
      ps::PlannedStopResponse response;
      return stub.PlannedStop(&context, ps::PlannedStopRequest(), &response);
    }
    if (method == "Save") {
      ps::SaveResponse response;
      return stub.Save(&context, ps::SaveRequest(), &response);
    }
    if (method == "InputPositions") {
      ps::InputPositionsResponse response;
      return stub.InputPositions(&context, ps::InputPositionsRequest(), &response);
    }
    if (method == "SaveStatus") {
      ps::SaveStatusResponse response;
      return stub.SaveStatus(&context, ps::SaveStatusRequest(), &response);
    }
    return {grpc::StatusCode::INTERNAL, "the test does not know method " + method};
  };
}

void expect_every_method_refused(const std::string& service, const CallByName& call) {
  for (const std::string& token :
       {std::string(), std::string("0123456789abcdef"), std::string(64, 'a')}) {
    for (const auto& [method, code] : statuses(service, token, call)) {
      EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED)
          << service << "/" << method << " with token '" << token << "'";
    }
  }
}

TEST(ServiceSecurityTest, EveryMethodRefusesACallerWithoutTheJobsToken) {
  auto coordination =
      CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, testing::test_security());
  auto coordination_stub = pb::Coordination::NewStub(
      grpc::CreateChannel(coordination->address(), grpc::InsecureChannelCredentials()));
  expect_every_method_refused("cadre.coordination.Coordination",
                              coordination_calls(*coordination_stub));

  ps::ServerOptions options;
  options.security = testing::test_security();
  auto server = ps::ParameterServer::start("127.0.0.1:0", options);
  auto ps_stub = ps::ParameterServerService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  expect_every_method_refused("cadre.ps.ParameterServerService", ps_calls(*ps_stub));

  // A coordinator-mode worker's step service.
  StepServerOptions step_options;
  step_options.security = testing::test_security();
  auto steps_server = StepServer::start("127.0.0.1:0", step_options);
  auto steps_stub = steps::StepService::NewStub(
      grpc::CreateChannel(steps_server->address(), grpc::InsecureChannelCredentials()));
  expect_every_method_refused("cadre.steps.StepService", step_calls(*steps_stub));

  // A task of the job gets through (and reads the variables a stranger could not).
  ps::ClientOptions client_options;
  client_options.security = testing::test_security();
  ps::PsClient member(0, server->address(), client_options);
  Tensor value = Tensor::full(Shape{2}, 1.5);
  member.create(testing::create_request("w", &value, Shape{2}));
  EXPECT_EQ(
      ps::from_proto(member.pull(testing::pull_request("w")).values(0), "w").to_vector<float>(),
      (std::vector<float>{1.5f, 1.5f}));
  // A client holding another job's secret is told so, by name.
  client_options.security.secret = "another job's secret";
  ps::PsClient stranger(0, server->address(), client_options);
  EXPECT_THROW(stranger.pull(testing::pull_request("w")), UnauthenticatedError);
  ps::PushRequest push = testing::push_request(*nn::optimizers::sgd(1.0), true, 1);
  testing::add_dense(push, "w", Tensor::full(Shape{2}, 100.0));
  EXPECT_THROW(stranger.push(push), UnauthenticatedError);
  EXPECT_EQ(
      ps::from_proto(member.pull(testing::pull_request("w")).values(0), "w").to_vector<float>(),
      (std::vector<float>{1.5f, 1.5f}))
      << "a refused push changed the variable";
}

// A burst of refusals is told at once (the first) and in full by the time the service stops
// (the rest, counted): the count of a burst used to wait for the next refusal, 10 s later
// or never.
TEST(ServiceSecurityTest, ABurstOfRefusalsIsLoggedAtOnceAndCountedByTheStop) {
  testing::LogCapture log;
  {
    ps::ServerOptions options;
    options.security = testing::test_security();
    options.task = "ps:7";
    auto server = ps::ParameterServer::start("127.0.0.1:0", options);
    auto stub = ps::ParameterServerService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext context;
      ps::PullResponse response;
      EXPECT_EQ(stub->Pull(&context, ps::PullRequest(), &response).error_code(),
                grpc::StatusCode::UNAUTHENTICATED);
      if (i == 0) {
        EXPECT_EQ(log.matching({"ps:7 (parameter server): refused 1 call(s)"}).size(), 1u)
            << log.all();
      }
    }
  }
  EXPECT_EQ(log.matching({"ps:7 (parameter server): refused 2 call(s) without the job's token "
                          "since the last report, the last from ipv4:127.0.0.1:"})
                .size(),
            1u)
      << log.all();
}

TEST(ServiceSecurityTest, AServiceListensOnItsBindHostOnly) {
  ps::ServerOptions options;
  options.security = testing::test_security();
  options.security.bind_host = "127.0.0.2";
  auto server = ps::ParameterServer::start("127.0.0.1:0", options);
  std::string port = server->address().substr(server->address().rfind(':'));
  ps::ClientOptions client_options;
  client_options.security = testing::test_security();
  ps::PsClient there(0, "127.0.0.2" + port, client_options);
  EXPECT_NO_THROW(there.wait_until_ready(5));
  ps::PsClient not_there(0, "127.0.0.1" + port, client_options);
  EXPECT_THROW(not_there.wait_until_ready(1), DeadlineExceededError);
}

TEST(ServiceSecurityTest, AClusterWithoutASecretSaysWhatToSet) {
  try {
    CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, ClusterSecurity());
    FAIL() << "an open service was started";
  } catch (const FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("CADRE_JOB_SECRET_FILE"), std::string::npos) << e.what();
  }
  ClusterSecurity open;
  open.insecure = true;
  EXPECT_NO_THROW(CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, open));
}

// TLS files that cannot be read (a directory given for one, a missing one) are one
// InvalidArgumentError naming the file, not a stream's exception.
TEST(ServiceSecurityTest, UnreadableTlsFilesAreClearErrors) {
  ClusterSecurity security;
  security.secret = "a secret";
  for (const char* ca : {"/tmp", "/nonexistent/ca.pem"}) {
    security.ca_file = ca;
    security.cert_file = security.key_file = ca;
    try {
      CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, security);
      FAIL() << "a service started with TLS files " << ca;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(ca), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cadre
