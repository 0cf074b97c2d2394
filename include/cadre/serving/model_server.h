// A model server compatible with TensorFlow Serving: it serves the versions that exporters
// (LatestExporter, BestExporter) or Estimator::export_model write under one export base,
// over TensorFlow Serving's REST API (POST /v1/models/NAME[/versions/V]:predict, :classify
// and :regress, GET /v1/models/NAME[/versions/V][/metadata]) and its gRPC PredictionService
// (Predict, Classify, Regress, GetModelMetadata) and ModelService (GetModelStatus), so that
// clients written for TensorFlow Serving talk to it unchanged. Classify and Regress run the
// classification and regression signatures an EstimatorSpec exports (ExportOutput) on
// tf.Examples. Optionally over TLS (tls_cert_file, tls_key_file).
//
//   ServingOptions options;
//   options.export_base = "runs/fmnist/export/latest";
//   options.model_name = "fmnist";
//   options.rest_port = 8501;
//   auto server = ModelServer::start(model_fn, options, params);
//
// Versions are the export base's numbered subdirectories. The base is polled: a new
// version the policy selects is loaded and checked (each signature is run once on zeros)
// before requests see it, then swapped in atomically; requests in flight finish on the
// version they started on. A version that fails to load is refused with one log line and
// the versions already serving keep serving.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/estimator/model_fn.h"

namespace cadre {

// Which of the export base's versions are served (TensorFlow Serving's
// model_version_policy). Requests that name no version get the highest one served.
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_latest = 1;             // kLatest: the newest this many
  std::vector<int64_t> versions;  // kSpecific: exactly these (when present)

  // "latest", "latest:N", "all" or "specific:V1,V2,..."; InvalidArgumentError otherwise.
  static VersionPolicy parse(const std::string& text);
};

// Server-side batching (TensorFlow Serving's --enable_batching): concurrent requests for
// the same version and signature are run as one batch of at most max_batch_size examples,
// waiting at most batch_timeout_micros for a batch to fill. A request larger than
// max_batch_size runs as a batch of its own.
struct BatchingOptions {
  bool enabled = true;
  int max_batch_size = 32;
  int64_t batch_timeout_micros = 1000;
};

struct ServingOptions {
  // The directory whose numbered subdirectories are the versions (it may not exist yet:
  // the server waits for the first version).
  std::string export_base;
  std::string model_name = "default";
  // Where to listen. Nothing binds every interface unless told to ("0.0.0.0").
  std::string host = "127.0.0.1";
  int rest_port = 8501;  // 0: a free port (see ModelServer::rest_port); -1: no REST API
  int grpc_port = 8500;  // likewise for gRPC
  VersionPolicy version_policy;
  double poll_secs = 1;  // TensorFlow Serving's file_system_poll_wait_seconds
  BatchingOptions batching;
  // The threads of one forward pass (TensorFlow Serving's --tensorflow_intra_op_parallelism),
  // out of the process's budget (set_intra_op_threads); 0: the whole budget. One by default:
  // on 2 cores, answering requests side by side gained more than splitting a forward pass of
  // a few examples (1.02-2x requests/s, docs/benchmarks/2026-11-28-serving.md); a heavy model
  // on a large host may want more.
  int intra_op_threads = 1;
  // Requests (queued and running) beyond this many examples are refused at once:
  // RESOURCE_EXHAUSTED over gRPC, HTTP 429 over REST.
  int64_t max_queued_examples = 4096;
  // Bounds on what a client may send: request bodies and gRPC messages, JSON nesting,
  // concurrent HTTP connections, and the time a request may take to arrive.
  int64_t max_request_bytes = 64 << 20;
  int max_json_depth = 32;
  int max_connections = 256;
  double request_timeout_secs = 10;
  // When set, every request must carry "Authorization: Bearer <token>" (HTTP header or
  // gRPC metadata); others get UNAUTHENTICATED (HTTP 401).
  std::string bearer_token;
  // TLS for both APIs when both are set: the server's certificate (chain) and private key,
  // PEM files (as the cluster's CADRE_TLS_CERT / CADRE_TLS_KEY). REST is then https only (a
  // plain HTTP request gets 400 saying so) and gRPC takes TLS channels only. Clients are not
  // asked for certificates: the bearer token says who may call.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Thread-safe. The destructor stops the server (as stop()).
class ModelServer {
 public:
  // Listens on the ports and loads the versions present now before returning (a server
  // over a base with no complete version yet starts and waits for one). Throws
  // InvalidArgumentError for bad options (TLS files that cannot be read or do not match
  // included) and UnavailableError when a port cannot be bound.
  static std::unique_ptr<ModelServer> start(ModelFn model_fn, const ServingOptions& options,
                                            Params params = {});
  virtual ~ModelServer();

  virtual int rest_port() const = 0;  // the bound ports; -1 when not served
  virtual int grpc_port() const = 0;
  // The versions being served, ascending.
  virtual std::vector<int64_t> versions() const = 0;
  // Stops taking requests, lets those in flight finish and joins every thread. Idempotent.
  virtual void stop() = 0;
};

// Starts a ModelServer and serves until SIGTERM or SIGINT, then stops it and returns. The
// signals' previous actions are restored on return.
void serve(ModelFn model_fn, const ServingOptions& options, Params params = {});

}  // namespace cadre
