#include "tools/cadre_bench/serve_bench.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cadre/base/errors.h"
#include "cadre/io/idx.h"
#include "cadre/io/mnist.h"
#include "core/base/strings.h"
#include "serving/proto/serving_apis.pb.h"
#include "tools/cadre_bench/grpc_load.h"
#include "tools/cadre_bench/http_load.h"

DECLARE_string(data_dir);
DEFINE_string(host, "127.0.0.1", "serve: the server's IPv4 address");
DEFINE_int32(port, 8501, "serve: the server's port (REST's, or gRPC's with --protocol=grpc)");
DEFINE_string(protocol, "rest",
              "serve: rest (POST :predict, JSON) or grpc (PredictionService.Predict, the image "
              "as a float32 TensorProto's tensor_content, as tf.make_tensor_proto sends it)");
DEFINE_string(model_name, "fashion_mnist", "serve: the model's name in the request path");
DEFINE_int32(concurrency, 1, "serve: connections, each with one request in flight");
DEFINE_int32(grpc_channels, 1,
             "serve: --protocol=grpc: channels (connections) the calls are spread over");
DEFINE_double(seconds, 5, "serve: the measured interval");
DEFINE_double(warmup_secs, 1, "serve: the unmeasured interval before it");

namespace cadre::bench {
namespace {

Tensor first_test_image() {
  return io::scale_pixels(io::read_mnist(FLAGS_data_dir, io::Split::kTest).images)
      .slice(0, 0, 1)
      .contiguous();
}

// The first test image as a serialized PredictRequest for the input "image" [1, 784].
std::string grpc_predict_request() {
  Tensor image = first_test_image();
  tensorflow::serving::PredictRequest request;
  request.mutable_model_spec()->set_name(FLAGS_model_name);
  tensorflow::TensorProto& input = (*request.mutable_inputs())["image"];
  input.set_dtype(tensorflow::DT_FLOAT);
  input.mutable_tensor_shape()->add_dim()->set_size(1);
  input.mutable_tensor_shape()->add_dim()->set_size(image.numel());
  input.set_tensor_content(std::string(reinterpret_cast<const char*>(image.data<float>()),
                                       static_cast<size_t>(image.numel()) * sizeof(float)));
  return request.SerializeAsString();
}

// The first test image as a predict request, each pixel with the digits a float32 needs
// to round-trip (what a client serializing float32 arrays sends).
std::string predict_request() {
  Tensor image = first_test_image();
  std::string body = "{\"instances\": [[";
  char number[32];
  for (int64_t i = 0; i < image.numel(); ++i) {
    std::snprintf(number, sizeof number, "%s%.9g", i ? "," : "", image.data<float>()[i]);
    body += number;
  }
  body += "]]}";
  return str_cat("POST /v1/models/", FLAGS_model_name,
                 ":predict HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                 "Content-Length: ",
                 body.size(), "\r\n\r\n", body);
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t index = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

}  // namespace

int run_serve() {
  HttpLoadResult result;
  if (FLAGS_protocol == "grpc") {
    GrpcLoadOptions options;
    options.target = str_cat(FLAGS_host, ":", FLAGS_port);
    options.request = grpc_predict_request();
    options.concurrency = FLAGS_concurrency;
    options.channels = FLAGS_grpc_channels;
    options.seconds = FLAGS_seconds;
    options.warmup_secs = FLAGS_warmup_secs;
    result = run_grpc_load(options);
  } else if (FLAGS_protocol == "rest") {
    HttpLoadOptions options;
    options.host = FLAGS_host;
    options.port = FLAGS_port;
    options.request = predict_request();
    options.concurrency = FLAGS_concurrency;
    options.seconds = FLAGS_seconds;
    options.warmup_secs = FLAGS_warmup_secs;
    result = run_http_load(options);
  } else {
    throw InvalidArgumentError(
        str_cat("--protocol=", FLAGS_protocol, " is not one of: rest, grpc"));
  }
  std::vector<double>& latencies = result.latencies_ms;
  std::sort(latencies.begin(), latencies.end());
  if (result.failures > 0) {
    std::cerr << "cadre_bench serve: " << result.failures
              << " failed requests; the first: " << result.first_failure << "\n";
  }
  std::printf(
      "{\"protocol\":\"%s\",\"concurrency\":%d,\"requests\":%lld,\"failures\":%lld,\"seconds\":%."
      "3f,"
      "\"requests_per_sec\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
      "\"client_cpu\":%.3f}\n",
      FLAGS_protocol.c_str(), FLAGS_concurrency, static_cast<long long>(result.responses),
      static_cast<long long>(result.failures), result.seconds,
      static_cast<double>(result.responses) / result.seconds, percentile(latencies, 0.5),
      percentile(latencies, 0.99), latencies.empty() ? 0.0 : latencies.back(),
      result.client_cpu_secs / result.seconds);
  return 0;
}

}  // namespace cadre::bench
