// What the services of a cluster on 127.0.0.1 read of a request: a stranger's is refused
// without reading more than a bounded prefix of it; a malformed parameter-server request gets
// a clear error and the server goes on serving.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/cluster/step_server.h"
#include "strategies/ps/ps.grpc.pb.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/tensor_data.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

// This process's resident memory now and at its peak since the last reset_peak_memory().
int64_t memory_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  ADD_FAILURE() << "no " << field << " in /proc/self/status";
  return 0;
}
void reset_peak_memory() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A stranger's well-framed request that carries 64 MiB in a field the service does not know,
// sent by four strangers at once to each service: refused without being read, so that the
// process's peak memory grows by much less than one request. (Read and parsed before the
// token was checked, four such requests grew a ps task by 488 MiB.)
TEST(ServiceSecurityTest, NoServiceReadsMoreThanABoundedPrefixOfAStrangersRequest) {
  auto coordination =
      CoordinationService::start("127.0.0.1:0", {{"worker", 0}}, {}, testing::test_security());
  ps::ServerOptions options;
  options.security = testing::test_security();
  options.max_message_bytes = int64_t{1} << 30;  // a ps task serving large slices
  auto server = ps::ParameterServer::start("127.0.0.1:0", options);
  StepServerOptions step_options;
  step_options.security = testing::test_security();
  auto steps_server = StepServer::start("127.0.0.1:0", step_options);

  constexpr size_t kFieldBytes = size_t{64} << 20;
  std::string request;
  auto varint = [&request](uint64_t n) {
    for (; n >= 0x80; n >>= 7) request += static_cast<char>((n & 0x7f) | 0x80);
    request += static_cast<char>(n);
  };
  varint(1000 << 3 | 2);  // field 1000, length-delimited
  varint(kFieldBytes);
  request.resize(request.size() + kFieldBytes, 'x');  // touched: counted before the calls
  // Shared by every call without a copy.
  grpc::Slice slice(request.data(), request.size(), grpc::Slice::STATIC_SLICE);

  const std::vector<std::pair<std::string, std::string>> targets = {
      {coordination->address(), "/cadre.coordination.Coordination/SetKey"},
      {server->address(), "/cadre.ps.ParameterServerService/Push"},
      {steps_server->address(), "/cadre.steps.StepService/RunUnit"}};
  for (const auto& [address, method] : targets) {
    reset_peak_memory();
    const int64_t before = memory_kib("VmRSS");
    std::vector<grpc::Status> results(4);
    std::vector<std::thread> strangers;
    for (size_t i = 0; i < results.size(); ++i) {
      strangers.emplace_back([&, i, address = address, method = method] {
        grpc::ChannelArguments args;
        args.SetInt("cadre.stranger", static_cast<int>(i));  // a connection of its own
        grpc::GenericStub stub(
            grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        // Under a loaded parallel ctest a first connect failed twice at once ("failed to
        // connect to all addresses"), never the door: the call waits out such a failure.
        context.set_wait_for_ready(true);
        grpc::ByteBuffer in(&slice, 1), out;
        std::mutex mutex;
        std::condition_variable done;
        bool finished = false;
        stub.UnaryCall(&context, method, grpc::StubOptions(), &in, &out, [&](grpc::Status status) {
          std::lock_guard<std::mutex> lock(mutex);
          results[i] = std::move(status);
          finished = true;
          done.notify_one();
        });
        std::unique_lock<std::mutex> lock(mutex);
        done.wait(lock, [&] { return finished; });
      });
    }
    for (std::thread& t : strangers) t.join();
    for (const grpc::Status& status : results) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << method << ": " << status.error_message();
    }
    const int64_t growth_kib = memory_kib("VmHWM") - before;
    EXPECT_LT(growth_kib, 64 << 10)
        << method << ": four strangers' requests of " << (kFieldBytes >> 20)
        << " MiB grew the peak by " << (growth_kib >> 10) << " MiB";
  }
}

// Wrong shapes, dtypes, rows and sizes, unknown names and truncated tensors: each a clear
// error (never a crash or an allocation the size of the claim), and the server serves on.
TEST(ServiceSecurityTest, MalformedParameterServerRequestsAreClearErrors) {
  ps::ServerOptions options;
  options.security = testing::test_security();
  auto server = ps::ParameterServer::start("127.0.0.1:0", options);
  ps::ClientOptions client_options;
  client_options.security = testing::test_security();
  ps::PsClient client(0, server->address(), client_options);
  Tensor value = Tensor::full(Shape{4, 3}, 0.5);
  client.create(testing::create_request("w", &value, Shape{4, 3}));

  auto expect_error = [&](const std::string& what, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const InvalidArgumentError&) {
    } catch (const NotFoundError&) {
    } catch (const ResourceExhaustedError&) {
    } catch (const FailedPreconditionError&) {
    }
  };
  Tensor wrong = Tensor::full(Shape{3, 4}, 0.5);
  expect_error("a variable redefined with another shape", [&] {
    client.create(testing::create_request("w", &wrong, Shape{3, 4}));
  });
  expect_error("a huge shape", [&] {
    ps::CreateRequest request = testing::create_request("huge", nullptr, Shape{1}, 0.01);
    request.mutable_variable()->set_shape(0, int64_t{1} << 40);
    request.mutable_variable()->add_shape(int64_t{1} << 40);
    client.create(request);
  });
  expect_error("a negative dimension", [&] {
    ps::CreateRequest request = testing::create_request("negative", &value, Shape{4, 3});
    request.mutable_variable()->set_shape(0, -4);
    client.create(request);
  });
  expect_error("an unknown dtype", [&] {
    ps::CreateRequest request = testing::create_request("dtype", &value, Shape{4, 3});
    request.mutable_variable()->set_dtype(99);
    client.create(request);
  });
  expect_error("an initial value cut short", [&] {
    ps::CreateRequest request = testing::create_request("short", &value, Shape{4, 3});
    request.mutable_initial_value()->mutable_data()->resize(5);
    client.create(request);
  });
  expect_error("an unknown variable", [&] { client.pull(testing::pull_request("nobody")); });
  expect_error("rows out of range", [&] {
    ps::PullRequest request = testing::pull_request("w");
    ps::to_proto(Tensor::from_vector<int64_t>({0, 4}), request.mutable_items(0)->mutable_rows());
    client.pull(request);
  });
  expect_error("a gradient of the wrong shape", [&] {
    ps::PushRequest request = testing::push_request(*nn::optimizers::sgd(0.1), false, 0.01);
    testing::add_dense(request, "w", Tensor::full(Shape{2, 2}, 1.0));
    client.push(request);
  });
  expect_error("a gradient of the wrong dtype", [&] {
    ps::PushRequest request = testing::push_request(*nn::optimizers::sgd(0.1), false, 0.01);
    testing::add_dense(request, "w", Tensor::full(Shape{4, 3}, 1.0).cast(DType::kFloat64));
    client.push(request);
  });
  expect_error("sparse rows out of range", [&] {
    ps::PushRequest request = testing::push_request(*nn::optimizers::sgd(0.1), false, 0.01);
    ps::PushItem* item = request.add_items();
    item->set_name("w");
    item->set_sparse(true);
    ps::to_proto(Tensor::from_vector<int64_t>({7}), item->mutable_indices());
    ps::to_proto(Tensor::full(Shape{1, 3}, 1.0), item->mutable_values());
    client.push(request);
  });
  // Still serving, the variable untouched.
  EXPECT_EQ(
      ps::from_proto(client.pull(testing::pull_request("w")).values(0), "w").to_vector<float>(),
      std::vector<float>(12, 0.5f));
}

}  // namespace
}  // namespace cadre
