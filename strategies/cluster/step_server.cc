#include "strategies/cluster/step_server.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/strings.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/cluster/guarded_server.h"
#include "strategies/cluster/step_service.grpc.pb.h"

namespace cadre {
namespace {

using std::chrono::milliseconds;

class Server final : public StepServer, public steps::StepService::Service {
 public:
  explicit Server(StepServerOptions options) : options_(std::move(options)) {}
  ~Server() override { stop("the worker is shutting down", ErrorCode::kUnavailable, false); }

  void start(const std::string& address) {
    server_ = GuardedServer::start(*this, address, options_.security,
                                   str_cat(options_.task, ": the step service "),
                                   str_cat(options_.task, " (step service)"));
    address_ = server_->address();
    LOG(INFO) << options_.task << ": serving the client's steps on " << address_;
  }

  std::string address() const override { return address_; }

  grpc::Status RunUnit(grpc::ServerContext* context, const steps::RunUnitRequest* request,
                       steps::RunUnitResponse* response) override {
    if (request->unit() <= 0 || request->steps() <= 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              str_cat(options_.task, ": unit ", request->unit(), " of ", request->steps(),
                      " steps; expected a positive unit id and steps")};
    }
    MutexLock lock(mutex_);
    if (stopping_ || finished_) return stopped_status(*context, finished_ && !stopping_);
    if (unit_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              str_cat(options_.task, " is running unit ", unit_->id, " already")};
    }
    unit_ = ps::WorkUnit{request->generation(), request->unit(), request->steps()};
    outcome_.reset();
    complete_ = false;
    steps_applied_ = 0;
    uint64_t mine = ++serial_;
    changed_.notify_all();
    while (!complete_ && !stopping_) {
      changed_.wait_for(mutex_, milliseconds(200));
      if (context->IsCancelled()) {
        // The client is gone: the unit stops here, and whoever comes next dispatches it again.
        if (serial_ == mine) unit_.reset();
        return {grpc::StatusCode::CANCELLED, "the client cancelled the unit"};
      }
    }
    if (serial_ == mine) unit_.reset();
    if (!complete_) return stopped_status(*context, false);
    response->set_applied(outcome_->applied);
    response->set_closed(outcome_->closed);
    response->set_global_step(outcome_->global_step);
    response->set_steps_applied(steps_applied_);
    return grpc::Status::OK;
  }

  grpc::Status Finish(grpc::ServerContext* context, const steps::FinishRequest*,
                      steps::FinishResponse*) override {
    MutexLock lock(mutex_);
    finished_ = true;
    changed_.notify_all();
    return grpc::Status::OK;
  }

  std::optional<ps::WorkUnit> next_step(const std::function<bool()>& finished,
                                        const std::function<bool()>& interrupted) override {
    auto next_finished_look = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (true) {
      {
        MutexLock lock(mutex_);
        auto ready = [&]() CADRE_REQUIRES(mutex_) {
          return finished_ || stopping_ || (unit_ && !complete_);
        };
        changed_.wait_for(mutex_, milliseconds(200), ready);
        if (finished_ || stopping_) return std::nullopt;
        if (unit_ && !complete_) return unit_;
      }
      if (interrupted && interrupted()) return std::nullopt;
      if (std::chrono::steady_clock::now() < next_finished_look) continue;
      next_finished_look = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      if (finished && finished()) {
        MutexLock lock(mutex_);
        finished_ = true;
        changed_.notify_all();
        return std::nullopt;
      }
    }
  }

  void step_done(const ps::WorkUnit& unit, const ps::UnitOutcome& outcome) override {
    MutexLock lock(mutex_);
    if (!unit_ || unit_->id != unit.id || unit_->generation != unit.generation) return;
    if (!outcome.closed) ++steps_applied_;
    outcome_ = outcome;
    if (outcome.complete(unit)) {
      complete_ = true;
      changed_.notify_all();
    }
  }

  void stop(const std::string& why, ErrorCode code, bool training_failed) override {
    {
      MutexLock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      why_ = why;
      code_ = code;
      training_failed_ = training_failed;
      changed_.notify_all();
    }
    if (server_) server_->shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

 private:
  grpc::Status stopped_status(grpc::ServerContext& context, bool finished) CADRE_REQUIRES(mutex_) {
    if (finished) {
      return {grpc::StatusCode::UNAVAILABLE, str_cat(options_.task, ": training is finished")};
    }
    if (training_failed_) context.AddTrailingMetadata(kTrainingFailedKey, "1");
    return {static_cast<grpc::StatusCode>(code_), str_cat(options_.task, ": ", why_)};
  }

  StepServerOptions options_;
  std::unique_ptr<GuardedServer> server_;
  std::string address_;
  Mutex mutex_;
  CondVar changed_;
  std::optional<ps::WorkUnit> unit_ CADRE_GUARDED_BY(mutex_);  // the unit running
  uint64_t serial_ CADRE_GUARDED_BY(mutex_) = 0;               // one per RunUnit call
  std::optional<ps::UnitOutcome> outcome_ CADRE_GUARDED_BY(mutex_);
  int64_t steps_applied_ CADRE_GUARDED_BY(mutex_) = 0;
  bool complete_ CADRE_GUARDED_BY(mutex_) = false;
  bool finished_ CADRE_GUARDED_BY(mutex_) = false;
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::string why_ CADRE_GUARDED_BY(mutex_);
  ErrorCode code_ CADRE_GUARDED_BY(mutex_) = ErrorCode::kUnavailable;
  bool training_failed_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace

std::unique_ptr<StepServer> StepServer::start(const std::string& address,
                                              StepServerOptions options) {
  check_security_configured(options.security, options.task);
  auto server = std::make_unique<Server>(std::move(options));
  server->start(address);
  return server;
}

}  // namespace cadre
