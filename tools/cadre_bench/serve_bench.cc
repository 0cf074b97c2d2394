#include "tools/cadre_bench/serve_bench.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cadre/base/errors.h"
#include "cadre/io/idx.h"
#include "cadre/io/mnist.h"
#include "core/base/strings.h"
#include "tools/cadre_bench/http_load.h"

DECLARE_string(data_dir);
DEFINE_string(host, "127.0.0.1", "serve: the server's IPv4 address");
DEFINE_int32(port, 8501, "serve: the server's REST port");
DEFINE_string(model_name, "fashion_mnist", "serve: the model's name in the request path");
DEFINE_int32(concurrency, 1, "serve: connections, each with one request in flight");
DEFINE_double(seconds, 5, "serve: the measured interval");
DEFINE_double(warmup_secs, 1, "serve: the unmeasured interval before it");

namespace cadre::bench {
namespace {

// The first test image as a predict request, each pixel with the digits a float32 needs
// to round-trip (what a client serializing float32 arrays sends).
std::string predict_request() {
  Tensor image = io::scale_pixels(io::read_mnist(FLAGS_data_dir, io::Split::kTest).images)
                     .slice(0, 0, 1)
                     .contiguous();
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
  HttpLoadOptions options;
  options.host = FLAGS_host;
  options.port = FLAGS_port;
  options.request = predict_request();
  options.concurrency = FLAGS_concurrency;
  options.seconds = FLAGS_seconds;
  options.warmup_secs = FLAGS_warmup_secs;
  HttpLoadResult result = run_http_load(options);
  std::vector<double>& latencies = result.latencies_ms;
  std::sort(latencies.begin(), latencies.end());
  if (result.failures > 0) {
    std::cerr << "cadre_bench serve: " << result.failures
              << " failed requests; the first: " << result.first_failure << "\n";
  }
  std::printf(
      "{\"concurrency\":%d,\"requests\":%lld,\"failures\":%lld,\"seconds\":%.3f,"
      "\"requests_per_sec\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
      "\"client_cpu\":%.3f}\n",
      FLAGS_concurrency, static_cast<long long>(result.responses),
      static_cast<long long>(result.failures), result.seconds,
      static_cast<double>(result.responses) / result.seconds, percentile(latencies, 0.5),
      percentile(latencies, 0.99), latencies.empty() ? 0.0 : latencies.back(),
      result.client_cpu_secs / result.seconds);
  return 0;
}

}  // namespace cadre::bench
