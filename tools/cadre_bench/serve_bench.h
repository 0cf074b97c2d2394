#pragma once

namespace cadre::bench {

// `cadre_bench serve --port=P [--protocol=rest|grpc] [--model_name=N] [--concurrency=C]
// [--seconds=S]`: a predict load on a running model server (TensorFlow Serving's or
// Cadre's) for S seconds after a warm-up, each request one Fashion-MNIST test image. REST: C
// keep-alive connections each sending {"instances": [[784 floats]]} in turn
// (tools/cadre_bench/http_load.h); gRPC: C PredictionService.Predict calls in flight on one
// channel, the image a [1, 784] float TensorProto (tools/cadre_bench/grpc_load.h). The last
// line is one JSON object: requests_per_sec, p50_ms, p99_ms, failures, client_cpu (cores
// busy).
int run_serve();

}  // namespace cadre::bench
