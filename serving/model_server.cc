#include "cadre/serving/model_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <csignal>
#include <thread>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/batcher.h"
#include "serving/grpc_api.h"
#include "serving/http_server.h"
#include "serving/inference.h"
#include "serving/model_versions.h"
#include "serving/rest_api.h"

namespace cadre {

namespace {

using namespace serving_internal;

void check_options(const ServingOptions& options) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgumentError(str_cat("serving options: ", what));
  };
  require(!options.export_base.empty(), "export_base is empty");
  require(
      !options.model_name.empty() && options.model_name.find_first_of("/:?") == std::string::npos,
      str_cat("model_name '", options.model_name, "' must be non-empty, without / : ?"));
  require(!options.host.empty(), "host is empty");
  for (int port : {options.rest_port, options.grpc_port}) {
    require(port >= -1 && port <= 65535, str_cat("port ", port, " is not -1, 0 or a port"));
  }
  require(options.rest_port >= 0 || options.grpc_port >= 0, "neither REST nor gRPC is served");
  require(options.poll_secs > 0, "poll_secs must be positive");
  require(options.batching.max_batch_size > 0, "batching.max_batch_size must be positive");
  require(options.batching.batch_timeout_micros >= 0, "batching.batch_timeout_micros must be >= 0");
  require(options.max_queued_examples > 0, "max_queued_examples must be positive");
  require(options.intra_op_threads >= 0, "intra_op_threads must be 0 (the budget) or more");
  require(options.max_request_bytes > 0, "max_request_bytes must be positive");
  require(options.max_json_depth > 0, "max_json_depth must be positive");
  require(options.max_connections > 0, "max_connections must be positive");
  require(options.request_timeout_secs > 0, "request_timeout_secs must be positive");
  require(options.tls_cert_file.empty() == options.tls_key_file.empty(),
          "TLS needs both tls_cert_file and tls_key_file");
}

class Server final : public ModelServer {
 public:
  Server(ModelFn model_fn, const ServingOptions& options, Params params)
      : options_(options),
        versions_(options.model_name, options.export_base, options.version_policy,
                  std::move(model_fn), std::move(params)),
        batcher_(options.batching, options.max_queued_examples, options.intra_op_threads),
        inference_(versions_, batcher_),
        rest_(inference_, options_) {
    versions_.poll();
    // Made (and so checked: readable, a certificate and its key) whichever APIs are served.
    std::shared_ptr<const TlsContext> tls;
    if (!options_.tls_cert_file.empty()) {
      tls = std::make_shared<TlsContext>(options_.tls_cert_file, options_.tls_key_file);
    }
    if (options_.rest_port >= 0) {
      HttpLimits limits;
      limits.max_body_bytes = static_cast<size_t>(options_.max_request_bytes);
      http_ = std::make_unique<HttpServer>(
          options_.host, options_.rest_port, limits, options_.max_connections,
          options_.request_timeout_secs,
          [this](const HttpRequest& request) { return rest_.handle(request); }, std::move(tls));
    }
    if (options_.grpc_port >= 0) grpc_ = std::make_unique<GrpcApi>(inference_, options_);
    poller_ = std::thread([this] { poll_loop(); });
    LOG(INFO) << "serving model " << options_.model_name << " from " << options_.export_base
              << ": REST " << (http_ ? str_cat("on ", options_.host, ":", rest_port()) : "off")
              << ", gRPC " << (grpc_ ? str_cat("on ", options_.host, ":", grpc_port()) : "off")
              << (options_.tls_cert_file.empty() ? "" : " (TLS)");
  }
  ~Server() override { stop(); }

  int rest_port() const override { return http_ ? http_->port() : -1; }
  int grpc_port() const override { return grpc_ ? grpc_->port() : -1; }
  std::vector<int64_t> versions() const override {
    std::vector<int64_t> out;
    for (const auto& [version, loaded] : versions_.all()) out.push_back(version);
    return out;
  }

  void stop() override {
    {
      MutexLock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (poller_.joinable()) poller_.join();
    if (http_) http_->stop();
    if (grpc_) grpc_->stop();
    batcher_.stop();
  }

 private:
  void poll_loop() {
    auto period = std::chrono::microseconds(static_cast<int64_t>(options_.poll_secs * 1e6));
    for (;;) {
      {
        MutexLock lock(mutex_);
        if (wake_.wait_for(mutex_, period, [this]() CADRE_REQUIRES(mutex_) { return stopping_; })) {
          return;
        }
      }
      try {
        versions_.poll();
      } catch (const std::exception& error) {
        LOG(WARNING) << "model " << options_.model_name << ": polling " << options_.export_base
                     << " failed: " << error.what();
      }
    }
  }

  const ServingOptions options_;
  ModelVersions versions_;
  Batcher batcher_;
  Inference inference_;
  RestApi rest_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcApi> grpc_;
  Mutex mutex_;
  CondVar wake_;
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::thread poller_;
};

std::atomic<int> stop_signal{0};

void on_stop_signal(int signal) { stop_signal = signal; }

}  // namespace

VersionPolicy VersionPolicy::parse(const std::string& text) {
  VersionPolicy policy;
  auto bad = [&]() {
    return InvalidArgumentError(str_cat("model version policy '", text,
                                        "' is invalid; expected latest, latest:N, all or "
                                        "specific:V1,V2,..."));
  };
  if (text == "latest" || text == "all") {
    policy.kind = text == "all" ? Kind::kAll : Kind::kLatest;
    return policy;
  }
  auto numbers = [&](std::string_view list) {
    std::vector<int64_t> values;
    while (!list.empty()) {
      size_t comma = std::min(list.find(','), list.size());
      int64_t value = 0;
      auto [end, error] = std::from_chars(list.data(), list.data() + comma, value);
      if (error != std::errc() || end != list.data() + comma || value < 1) throw bad();
      values.push_back(value);
      list.remove_prefix(std::min(comma + 1, list.size()));
    }
    return values;
  };
  if (text.rfind("latest:", 0) == 0) {
    std::vector<int64_t> count = numbers(std::string_view(text).substr(7));
    if (count.size() != 1 || count[0] > 1000) throw bad();
    policy.num_latest = static_cast<int>(count[0]);
    return policy;
  }
  if (text.rfind("specific:", 0) == 0) {
    policy.kind = Kind::kSpecific;
    policy.versions = numbers(std::string_view(text).substr(9));
    if (policy.versions.empty()) throw bad();
    return policy;
  }
  throw bad();
}

ModelServer::~ModelServer() = default;

std::unique_ptr<ModelServer> ModelServer::start(ModelFn model_fn, const ServingOptions& options,
                                                Params params) {
  if (!model_fn) throw InvalidArgumentError("ModelServer::start: model_fn is empty");
  check_options(options);
  return std::make_unique<Server>(std::move(model_fn), options, std::move(params));
}

void serve(ModelFn model_fn, const ServingOptions& options, Params params) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_term {
  }, old_int{};
  stop_signal = 0;
  sigaction(SIGTERM, &action, &old_term);
  sigaction(SIGINT, &action, &old_int);
  try {
    std::unique_ptr<ModelServer> server =
        ModelServer::start(std::move(model_fn), options, std::move(params));
    while (stop_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    LOG(INFO) << "signal " << stop_signal << ": stopping the model server";
    server->stop();
    LOG(INFO) << "the model server has stopped";
  } catch (...) {
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGINT, &old_int, nullptr);
    throw;
  }
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
}

}  // namespace cadre
