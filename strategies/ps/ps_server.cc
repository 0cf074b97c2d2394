#include "strategies/ps/ps_server.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/cluster/guarded_server.h"
#include "strategies/ps/part_saver.h"
#include "strategies/ps/ps.grpc.pb.h"
#include "strategies/ps/shard.h"

namespace cadre::ps {
namespace {

// Runs a handler, turning Cadre's errors into statuses with the same code.
template <typename F>
grpc::Status guarded(F&& handler) {
  try {
    handler();
    return grpc::Status::OK;
  } catch (const Error& e) {
    return {static_cast<grpc::StatusCode>(e.code()), e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

class Server final : public ParameterServer, public ParameterServerService::Service {
 public:
  explicit Server(ServerOptions options)
      : options_(std::move(options)),
        shard_(options_.task, options_.read_rows),
        parts_(options_.task, options_.write_part) {}
  ~Server() override { stop(); }

  void start(const std::string& address) {
    int limit = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
    server_ = GuardedServer::start(*this, address, options_.security,
                                   str_cat(options_.task, ": the parameter server "),
                                   str_cat(options_.task, " (parameter server)"), limit, limit);
    address_ = server_->address();
    logger_ = std::thread([this] { log_progress(); });
    LOG(INFO) << options_.task << ": parameter server on " << address_ << " (listening on "
              << server_->listening() << (options_.security.tls() ? ", mutual TLS)" : ")");
  }

  std::string address() const override { return address_; }

  void wait() override {
    MutexLock lock(mutex_);
    stopped_.wait(mutex_, [&]() CADRE_REQUIRES(mutex_) { return stopping_; });
  }

  bool wait_for(double seconds) override {
    MutexLock lock(mutex_);
    return stopped_.wait_for(mutex_, std::chrono::duration<double>(seconds),
                             [&]() CADRE_REQUIRES(mutex_) { return stopping_; });
  }

  double seconds_since_last_call() const override {
    auto last = Clock::time_point(Clock::duration(last_call_.load()));
    return std::chrono::duration<double>(Clock::now() - last).count();
  }

  void begin_planned_stop() override { own_stop_ = true; }

  void stop() override {
    {
      MutexLock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    stopped_.notify_all();
    shard_.stop();
    if (server_) server_->shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (logger_.joinable()) logger_.join();
  }

  grpc::Status Create(grpc::ServerContext* context, const CreateRequest* request,
                      CreateResponse* response) override {
    called();
    return guarded([&] {
      *response = shard_.create(*request);
      check_size(*response,
                 str_cat(options_.task, ": variable '", request->variable().name(), "'"));
    });
  }

  grpc::Status Pull(grpc::ServerContext* context, const PullRequest* request,
                    PullResponse* response) override {
    called();
    return guarded([&] {
      *response = shard_.pull(*request);
      response->set_planned_stop(planned_stop());
      check_size(*response, str_cat(options_.task, ": the pulled values of ", request->items_size(),
                                    " variable(s) from '",
                                    request->items_size() ? request->items(0).name() : "", "'"));
    });
  }

  grpc::Status Push(grpc::ServerContext* context, const PushRequest* request,
                    PushResponse* response) override {
    called();
    return guarded([&] {
      *response = shard_.push(*request);
      response->set_planned_stop(planned_stop());
    });
  }

  grpc::Status GlobalStep(grpc::ServerContext* context, const GlobalStepRequest* request,
                          GlobalStepResponse* response) override {
    called();
    // A chief setting the global step is a new run: an earlier chief's stop is over.
    if (request->set() && chief_stop_.exchange(false)) {
      LOG(INFO) << options_.task << ": a new chief; the planned stop of the last one is over";
    }
    return guarded([&] { response->set_value(shard_.global_step(*request)); });
  }

  grpc::Status PlannedStop(grpc::ServerContext* context, const PlannedStopRequest* request,
                           PlannedStopResponse* response) override {
    called();
    if (!chief_stop_.exchange(true)) {
      LOG(INFO) << options_.task << ": the chief's planned stop; telling every task that "
                << "pulls or pushes to stop after its step";
    }
    return grpc::Status::OK;
  }

  grpc::Status Units(grpc::ServerContext* context, const UnitsRequest* request,
                     UnitsResponse* response) override {
    called();
    return guarded([&] { *response = shard_.units(*request); });
  }

  grpc::Status InputPositions(grpc::ServerContext* context, const InputPositionsRequest* request,
                              InputPositionsResponse* response) override {
    called();
    return guarded([&] {
      *response = shard_.input_positions(*request);
      check_size(*response, str_cat(options_.task, ": the workers' input positions"));
    });
  }

  grpc::Status Save(grpc::ServerContext* context, const SaveRequest* request,
                    SaveResponse* response) override {
    called();
    return guarded([&] { *response = parts_.save(shard_, *request); });
  }

  grpc::Status SaveStatus(grpc::ServerContext* context, const SaveStatusRequest* request,
                          SaveStatusResponse* response) override {
    called();
    return guarded([&] { *response = parts_.status(*request); });
  }

  grpc::Status Read(grpc::ServerContext* context, const ReadRequest* request,
                    ReadResponse* response) override {
    called();
    return guarded([&] {
      *response = shard_.read(*request);
      // A listing carries no values; values are read in batches under the limit.
      if (!request->names().empty()) {
        check_size(*response, str_cat(options_.task, ": the values of ", request->names_size(),
                                      " variable(s) from '", request->names(0), "'"));
      }
    });
  }

 private:
  // Workers slice variables and batch their requests so that answers fit
  // (message_budget.h): only a single row larger than the limit, or a bug, fails here.
  template <typename Message>
  void check_size(const Message& message, const std::string& what) const {
    int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
    if (bytes > options_.max_message_bytes) {
      throw InternalError(str_cat(what, " take ", bytes, " bytes, over the message limit of ",
                                  options_.max_message_bytes,
                                  " bytes that workers cut their requests to fit (is one row "
                                  "larger than ParameterServerOptions.max_message_bytes?)"));
    }
  }

  void log_progress() {
    MutexLock lock(mutex_);
    while (!stopped_.wait_for(mutex_, std::chrono::duration<double>(options_.log_every_seconds),
                              [&]() CADRE_REQUIRES(mutex_) { return stopping_; })) {
      LOG(INFO) << shard_.report() << " in the last " << options_.log_every_seconds << " s";
    }
  }

  void called() { last_call_ = Clock::now().time_since_epoch().count(); }
  bool planned_stop() const { return own_stop_ || chief_stop_; }

  using Clock = std::chrono::steady_clock;
  ServerOptions options_;
  std::atomic<Clock::rep> last_call_{Clock::now().time_since_epoch().count()};
  // Planned stops (PlannedStopRequest): this task's own, and the chief's until a new chief.
  std::atomic<bool> own_stop_{false}, chief_stop_{false};
  Shard shard_;
  PartSaver parts_;
  std::unique_ptr<GuardedServer> server_;
  std::string address_;
  std::thread logger_;
  Mutex mutex_;
  CondVar stopped_;
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace

std::unique_ptr<ParameterServer> ParameterServer::start(const std::string& address,
                                                        ServerOptions options) {
  check_security_configured(options.security, options.task);
  auto server = std::make_unique<Server>(std::move(options));
  server->start(address);
  return server;
}

}  // namespace cadre::ps
