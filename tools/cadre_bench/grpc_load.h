// A closed-loop gRPC load generator for TensorFlow Serving's PredictionService.Predict:
// `concurrency` calls in flight on `channels` channels (by default one HTTP/2 connection,
// as a client's stub shares one), each sent again as soon as the previous one has completed, all
// driven by one thread through a completion queue, so that the client costs the machine little.
// Reports as the REST load does (tools/cadre_bench/http_load.h).
#pragma once

#include <string>

#include "tools/cadre_bench/http_load.h"

namespace cadre::bench {

struct GrpcLoadOptions {
  std::string target = "127.0.0.1:8500";  // host:port
  std::string request;                    // a serialized tensorflow.serving.PredictRequest
  int concurrency = 1;
  // Channels (connections) the calls are spread over, round robin; each its own HTTP/2
  // connection, as separate clients would have.
  int channels = 1;
  double warmup_secs = 1;  // calls completed in this first interval are not counted
  double seconds = 5;      // the measured interval after it
};

// Runs the load. Throws InvalidArgumentError for a request that does not parse and
// UnavailableError when the channel does not connect within 10 s.
HttpLoadResult run_grpc_load(const GrpcLoadOptions& options);

}  // namespace cadre::bench
