#include "tools/cadre_bench/grpc_load.h"

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <memory>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/proto/serving_apis.grpc.pb.h"
#include "tools/cadre_bench/timing.h"

namespace cadre::bench {
namespace {

namespace apis = tensorflow::serving;

double process_cpu_secs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

// One call in flight: what it needs until it completes (a ClientContext serves one call).
struct Call {
  std::unique_ptr<grpc::ClientContext> context;
  apis::PredictResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<apis::PredictResponse>> reader;
  Clock::time_point started;
};

}  // namespace

HttpLoadResult run_grpc_load(const GrpcLoadOptions& options) {
  if (options.concurrency < 1 || options.seconds <= 0 || options.warmup_secs < 0) {
    throw InvalidArgumentError("the load needs a concurrency of at least 1 and a duration");
  }
  apis::PredictRequest request;
  if (!request.ParseFromString(options.request)) {
    throw InvalidArgumentError("the gRPC load's request is not a PredictRequest");
  }
  if (options.channels < 1) throw InvalidArgumentError("the gRPC load needs a channel at least");
  std::vector<std::unique_ptr<apis::PredictionService::Stub>> stubs;
  for (int i = 0; i < options.channels; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(64 << 20);
    // Channels with equal arguments would share one connection.
    arguments.SetInt("cadre.bench_channel", i);
    auto channel =
        grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), arguments);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      throw UnavailableError(str_cat("cannot connect to ", options.target));
    }
    stubs.push_back(apis::PredictionService::NewStub(channel));
  }
  grpc::CompletionQueue queue;
  std::vector<Call> calls(static_cast<size_t>(options.concurrency));
  auto begin = [&](Call& call) {
    call.context = std::make_unique<grpc::ClientContext>();
    call.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    call.started = Clock::now();
    auto& stub = stubs[static_cast<size_t>(&call - calls.data()) % stubs.size()];
    call.reader = stub->PrepareAsyncPredict(call.context.get(), request, &queue);
    call.reader->StartCall();
    call.reader->Finish(&call.response, &call.status, &call);
  };

  HttpLoadResult result;
  auto start = Clock::now();
  auto measure_from =
      start + std::chrono::microseconds(static_cast<int64_t>(options.warmup_secs * 1e6));
  auto end = measure_from + std::chrono::microseconds(static_cast<int64_t>(options.seconds * 1e6));
  for (Call& call : calls) begin(call);
  bool measuring = false;
  double cpu_start = 0;
  size_t in_flight = calls.size();
  while (in_flight > 0) {
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    Call& call = *static_cast<Call*>(tag);
    auto done = Clock::now();
    if (!measuring && done >= measure_from) {
      measuring = true;
      cpu_start = process_cpu_secs();
    }
    if (call.started >= measure_from && done < end) {
      if (ok && call.status.ok()) {
        ++result.responses;
        result.latencies_ms.push_back(ms_between(call.started, done));
      } else if (result.failures++ == 0) {
        result.first_failure = str_cat("gRPC status ", static_cast<int>(call.status.error_code()),
                                       ": ", call.status.error_message());
      }
    }
    if (done < end) {
      begin(call);
    } else {
      --in_flight;  // past the interval: let the others drain
    }
  }
  result.seconds = ms_between(measure_from, end) / 1e3;
  result.client_cpu_secs = process_cpu_secs() - cpu_start;
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return result;
}

}  // namespace cadre::bench
