#pragma once

namespace cadre::bench {

// `cadre_bench serve --port=P [--model_name=N] [--concurrency=C] [--seconds=S]`: a REST
// predict load on a running model server (TensorFlow Serving's or Cadre's): C keep-alive
// connections each sending one Fashion-MNIST test image ({"instances": [[784 floats]]}) in
// turn for S seconds after a warm-up (tools/cadre_bench/http_load.h). The last line is one
// JSON object: requests_per_sec, p50_ms, p99_ms, failures, client_cpu (cores busy).
int run_serve();

}  // namespace cadre::bench
