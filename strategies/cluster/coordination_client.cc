// CoordinationClient: a training task's side of the coordination service (registration,
// heartbeats, the key-value store, barriers), over gRPC.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/strings.h"
#include "strategies/cluster/coordination.grpc.pb.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/cluster/deadline.h"
#include "strategies/cluster/grpc_security.h"

namespace cadre {

namespace pb = cadre::coordination;
using Clock = std::chrono::steady_clock;

namespace {

// gRPC status -> Cadre's typed error, naming the service.
void check(const grpc::Status& status, const std::string& what, const std::string& address,
           const ClusterSecurity& security) {
  if (status.ok()) return;
  std::string message =
      str_cat(what, " (coordination service at ", address, "): ", status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) message += refusal_hint(security);
  throw_error(static_cast<ErrorCode>(status.error_code()), message);
}

class Client final : public CoordinationClient {
 public:
  Client(const std::string& address, TaskId task, CoordinationOptions options,
         const ClusterSecurity& security)
      : address_(address),
        task_(std::move(task)),
        options_(options),
        security_(security),
        token_(security),
        stub_(pb::Coordination::NewStub(
            grpc::CreateChannel(address, channel_credentials(security)))) {
    std::random_device device;
    incarnation_ = (static_cast<uint64_t>(device()) << 32) | device();
  }
  ~Client() override { stop_heartbeats(); }

  void register_task(double timeout_seconds) override {
    pb::RegisterRequest request;
    fill(request.mutable_task());
    request.set_incarnation(incarnation_);
    request.set_timeout_seconds(timeout_seconds);
    LOG(INFO) << task_.to_string() << ": registering with the coordination service at " << address_
              << " (waiting up to " << timeout_seconds << " s for every task)";
    // wait_for_ready: the chief may start after this task.
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(timeout_seconds + 5));
    while (true) {
      pb::RegisterResponse response;
      double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      grpc::Status status = invoke(&pb::Coordination::Stub::Register, request, &response,
                                   std::max(left, 0.1), /*wait_for_ready=*/true);
      // A service that stopped while this task waited (its host's planned stop) is replaced
      // at the same address: wait for that one (wait_for_ready), within the same time.
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE && left > 1) {
        LOG(INFO) << task_.to_string() << ": " << status.error_message()
                  << "; registering with its successor";
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      check(status, "registration", address_, security_);
      hear_generation(response.view_generation());
      break;
    }
    heartbeats_ = std::thread([this] { beat(); });
  }

  void set(const std::string& key, const std::string& value) override {
    pb::SetKeyRequest request;
    request.set_key(key);
    request.set_value(value);
    call<pb::SetKeyResponse>(&pb::Coordination::Stub::SetKey, request,
                             str_cat("setting key '", key, "'"), 30);
  }

  std::string get(const std::string& key, double timeout_seconds) override {
    pb::GetKeyRequest request;
    request.set_key(key);
    request.set_timeout_seconds(timeout_seconds);
    return call<pb::GetKeyResponse>(&pb::Coordination::Stub::GetKey, request,
                                    str_cat("getting key '", key, "'"), timeout_seconds + 5)
        .value();
  }

  void wait(const std::vector<std::string>& keys, double timeout_seconds) override {
    auto end = Clock::now() + std::chrono::duration<double>(timeout_seconds);
    for (const std::string& key : keys) {
      get(key, std::max(0.0, std::chrono::duration<double>(end - Clock::now()).count()));
    }
  }

  void barrier(const std::string& name, double timeout_seconds) override {
    pb::BarrierRequest request;
    request.set_name(name);
    fill(request.mutable_task());
    request.set_timeout_seconds(timeout_seconds);
    call<pb::BarrierResponse>(&pb::Coordination::Stub::Barrier, request,
                              str_cat("barrier '", name, "'"), timeout_seconds + 5);
  }

  void stop_heartbeats() override {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (heartbeats_.joinable()) heartbeats_.join();
  }

  std::string failure() const override {
    MutexLock lock(mutex_);
    return failure_;
  }

  bool planned_stop_requested() const override { return planned_stop_.load(); }
  int64_t view_generation() const override { return view_generation_.load(); }
  void report_broken(int64_t generation) override {
    broken_generation_ = generation;
    heartbeat(options_.heartbeat_interval_seconds * 3);
  }

  std::string failure_now(double timeout_seconds) override {
    grpc::Status status = heartbeat(timeout_seconds);
    MutexLock lock(mutex_);
    take_verdict(status);
    return failure_;
  }

  void report_error(const std::string& message, double timeout_seconds) override {
    pb::ReportErrorRequest request;
    fill(request.mutable_task());
    request.set_incarnation(incarnation_);
    request.set_message(message);
    try {
      call<pb::ReportErrorResponse>(&pb::Coordination::Stub::ReportError, request,
                                    "reporting this task's error", timeout_seconds);
    } catch (const std::exception& e) {
      LOG(WARNING) << task_.to_string() << ": " << e.what();
    }
  }

 private:
  // One call with the job's token and a deadline `seconds` away.
  template <typename Response, typename Request, typename Method>
  grpc::Status invoke(Method method, const Request& request, Response* response, double seconds,
                      bool wait_for_ready = false) {
    grpc::ClientContext context;
    token_.add_to(context);
    context.set_deadline(deadline_after(seconds));
    context.set_wait_for_ready(wait_for_ready);
    return (stub_.get()->*method)(&context, request, response);
  }
  // invoke(), a failure being Cadre's typed error naming `what` and the service.
  template <typename Response, typename Request, typename Method>
  Response call(Method method, const Request& request, const std::string& what, double seconds,
                bool wait_for_ready = false) {
    Response response;
    check(invoke(method, request, &response, seconds, wait_for_ready), what, address_, security_);
    return response;
  }

  void fill(pb::Task* task) const {
    task->set_type(task_.type);
    task->set_index(task_.index);
  }

  grpc::Status heartbeat(double seconds) {
    pb::HeartbeatRequest request;
    fill(request.mutable_task());
    request.set_incarnation(incarnation_);
    request.set_broken_generation(broken_generation_.load());
    pb::HeartbeatResponse response;
    grpc::Status status = invoke(&pb::Coordination::Stub::Heartbeat, request, &response, seconds);
    if (status.ok() && response.planned_stop() && !planned_stop_.exchange(true)) {
      LOG(WARNING) << task_.to_string() << ": the coordination service asks for a planned stop";
    }
    if (status.ok()) hear_generation(response.view_generation());
    return status;
  }
  // Heartbeats answered out of order must not take the generation back.
  void hear_generation(int64_t generation) {
    int64_t known = view_generation_.load();
    while (generation > known && !view_generation_.compare_exchange_weak(known, generation)) {
    }
  }

  // The service answers ABORTED, naming the failure, once the cluster has failed.
  void take_verdict(const grpc::Status& status) CADRE_REQUIRES(mutex_) {
    if (status.error_code() != grpc::StatusCode::ABORTED) return;
    if (failure_.empty()) LOG(ERROR) << task_.to_string() << ": " << status.error_message();
    failure_ = status.error_message();
  }

  void beat() {
    auto unreachable_since = Clock::now();
    bool reachable = true;
    MutexLock lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      grpc::Status status = heartbeat(options_.heartbeat_interval_seconds * 3);
      lock.lock();
      if (status.ok()) {
        reachable = true;
      } else if (status.error_code() == grpc::StatusCode::ABORTED) {
        take_verdict(status);
      } else {
        if (reachable) unreachable_since = Clock::now();
        reachable = false;
        double silent = std::chrono::duration<double>(Clock::now() - unreachable_since).count();
        if (silent > options_.heartbeat_timeout_seconds && failure_.empty()) {
          failure_ = str_cat("the coordination service at ", address_, " has not answered for ",
                             static_cast<int>(silent), " s: the chief died or hung (",
                             status.error_message(), ")");
          LOG(ERROR) << task_.to_string() << ": " << failure_;
        }
      }
      wake_.wait_for(mutex_, std::chrono::duration<double>(options_.heartbeat_interval_seconds));
    }
  }

  std::string address_;
  TaskId task_;
  CoordinationOptions options_;
  ClusterSecurity security_;
  JobToken token_;
  std::unique_ptr<pb::Coordination::Stub> stub_;
  uint64_t incarnation_ = 0;
  std::thread heartbeats_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::string failure_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  std::atomic<bool> planned_stop_{false};
  std::atomic<int64_t> view_generation_{0};
  std::atomic<int64_t> broken_generation_{0};
};

}  // namespace

std::unique_ptr<CoordinationClient> CoordinationClient::connect(const std::string& address,
                                                                TaskId task,
                                                                CoordinationOptions options,
                                                                const ClusterSecurity& security) {
  check_security_configured(security, task.to_string());
  return std::make_unique<Client>(address, std::move(task), options, security);
}

}  // namespace cadre
