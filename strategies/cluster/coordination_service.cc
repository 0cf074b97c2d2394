#include "strategies/cluster/coordination_service.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/strings.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/cluster/coordination.grpc.pb.h"

namespace cadre {

namespace pb = cadre::coordination;
using Clock = std::chrono::steady_clock;

namespace {

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string name_of(const pb::Task& task) { return str_cat(task.type(), ":", task.index()); }

constexpr int kMaxMessageBytes = 1 << 20;

std::string names(const std::set<std::string>& set) {
  return set.empty() ? std::string("none") : join(set);
}

class Service final : public pb::Coordination::Service, public CoordinationService {
 public:
  Service(std::vector<TaskId> tasks, CoordinationOptions options,
          const ClusterSecurity& security)
      : options_(options), security_(security), callers_(security, "coordination service") {
    for (const TaskId& t : tasks) expected_.insert(t.to_string());
  }
  ~Service() override { stop(); }

  void start(const std::string& address) {
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default: a second server would share the port silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Requests are small (keys and rendezvous records); anything larger is refused.
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    int port = 0;
    std::string listen = bind_address(security_, address);
    builder.AddListeningPort(listen, server_credentials(security_), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw UnavailableError(str_cat("coordination service: cannot listen on ", listen,
                                     " (the port is in use, or the address is not this host's)"));
    }
    address_ = address.substr(0, address.rfind(':') + 1) + std::to_string(port);
    monitor_ = std::thread([this] { monitor(); });
    LOG(INFO) << "coordination service on " << address_ << " for " << names(expected_)
              << " (listening on " << listen.substr(0, listen.rfind(':') + 1) << port
              << (security_.tls() ? ", mutual TLS)" : ")");
  }

  std::string address() const override { return address_; }

  void stop() override {
    {
      MutexLock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    changed_.notify_all();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (monitor_.joinable()) monitor_.join();
  }

  grpc::Status Register(grpc::ServerContext* context, const pb::RegisterRequest* request,
                        pb::RegisterResponse*) override {
    if (grpc::Status denied = callers_.check(*context); !denied.ok()) return denied;
    std::string task = name_of(request->task());
    MutexLock lock(mutex_);
    if (!expected_.count(task)) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              str_cat("task ", task, " is not in the cluster (", names(expected_), ")")};
    }
    auto known = incarnation_.find(task);
    if (known != incarnation_.end() && known->second != request->incarnation() && complete()) {
      fail(str_cat("task ", task, " restarted after the cluster had formed"));
    }
    incarnation_[task] = request->incarnation();
    heartbeat_[task] = Clock::now();
    changed_.notify_all();
    auto deadline = Clock::now() + seconds(request->timeout_seconds());
    while (!complete() && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) && !complete()) {
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                str_cat("registration timed out after ", request->timeout_seconds(),
                        " s: tasks that never registered: ", names(missing()),
                        " (registered: ", names(registered()), ")")};
      }
    }
    return status_locked();
  }

  grpc::Status Heartbeat(grpc::ServerContext* context, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse*) override {
    if (grpc::Status denied = callers_.check(*context); !denied.ok()) return denied;
    MutexLock lock(mutex_);
    heartbeat_[name_of(request->task())] = Clock::now();
    return status_locked();
  }

  grpc::Status SetKey(grpc::ServerContext* context, const pb::SetKeyRequest* request,
                      pb::SetKeyResponse*) override {
    if (grpc::Status denied = callers_.check(*context); !denied.ok()) return denied;
    MutexLock lock(mutex_);
    store_[request->key()] = request->value();
    changed_.notify_all();
    return status_locked();
  }

  grpc::Status GetKey(grpc::ServerContext* context, const pb::GetKeyRequest* request,
                      pb::GetKeyResponse* response) override {
    if (grpc::Status denied = callers_.check(*context); !denied.ok()) return denied;
    MutexLock lock(mutex_);
    auto deadline = Clock::now() + seconds(request->timeout_seconds());
    while (!store_.count(request->key()) && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) &&
          !store_.count(request->key())) {
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                str_cat("key '", request->key(), "' was not set within ",
                        request->timeout_seconds(), " s")};
      }
    }
    if (auto it = store_.find(request->key()); it != store_.end()) {
      response->set_value(it->second);
      return grpc::Status::OK;
    }
    return status_locked();
  }

  grpc::Status Barrier(grpc::ServerContext* context, const pb::BarrierRequest* request,
                       pb::BarrierResponse*) override {
    if (grpc::Status denied = callers_.check(*context); !denied.ok()) return denied;
    MutexLock lock(mutex_);
    std::set<std::string>& arrived = barriers_[request->name()];
    arrived.insert(name_of(request->task()));
    changed_.notify_all();
    auto deadline = Clock::now() + seconds(request->timeout_seconds());
    while (arrived.size() < expected_.size() && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) &&
          arrived.size() < expected_.size()) {
        std::set<std::string> absent;
        for (const std::string& t : expected_) {
          if (!arrived.count(t)) absent.insert(t);
        }
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                str_cat("barrier '", request->name(), "' timed out after ",
                        request->timeout_seconds(), " s: waiting for ", names(absent))};
      }
    }
    return status_locked();
  }

 private:
  bool complete() const CADRE_REQUIRES(mutex_) { return incarnation_.size() == expected_.size(); }
  std::set<std::string> registered() const CADRE_REQUIRES(mutex_) {
    std::set<std::string> out;
    for (const auto& [task, incarnation] : incarnation_) out.insert(task);
    return out;
  }
  std::set<std::string> missing() const CADRE_REQUIRES(mutex_) {
    std::set<std::string> out;
    for (const std::string& t : expected_) {
      if (!incarnation_.count(t)) out.insert(t);
    }
    return out;
  }
  void fail(const std::string& reason) CADRE_REQUIRES(mutex_) {
    if (!failure_.empty()) return;
    failure_ = reason;
    LOG(ERROR) << "coordination service: " << reason << "; every task is told to stop";
    changed_.notify_all();
  }
  grpc::Status status_locked() const CADRE_REQUIRES(mutex_) {
    if (!failure_.empty()) return {grpc::StatusCode::ABORTED, failure_};
    if (stopping_) return {grpc::StatusCode::UNAVAILABLE, "the coordination service stopped"};
    return grpc::Status::OK;
  }

  // Declares silent tasks dead, and says who registration is waiting for.
  void monitor() {
    auto last_log = Clock::now();
    MutexLock lock(mutex_);
    while (!stopping_) {
      changed_.wait_for(mutex_, std::chrono::milliseconds(200));
      auto now = Clock::now();
      if (!complete() && !incarnation_.empty() &&
          now - last_log > seconds(options_.log_every_seconds)) {
        LOG(INFO) << "coordination service: waiting for " << names(missing())
                  << " to register (registered: " << names(registered()) << ")";
        last_log = now;
      }
      if (!complete() || !failure_.empty()) continue;
      for (const auto& [task, last] : heartbeat_) {
        double silent = std::chrono::duration<double>(now - last).count();
        if (silent > options_.heartbeat_timeout_seconds) {
          fail(str_cat("task ", task, " has sent no heartbeat for ", static_cast<int>(silent),
                       " s: it died or hung"));
          break;
        }
      }
    }
  }

  CoordinationOptions options_;
  ClusterSecurity security_;
  CallerCheck callers_;
  std::set<std::string> expected_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
  std::thread monitor_;
  mutable Mutex mutex_;
  CondVar changed_;
  std::map<std::string, uint64_t> incarnation_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, Clock::time_point> heartbeat_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, std::string> store_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, std::set<std::string>> barriers_ CADRE_GUARDED_BY(mutex_);
  std::string failure_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
};

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
    pb::RegisterResponse response;
    grpc::ClientContext context;
    add_job_token(context, security_);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(timeout_seconds + 5)));
    context.set_wait_for_ready(true);  // the chief may start after this task
    LOG(INFO) << task_.to_string() << ": registering with the coordination service at " << address_
              << " (waiting up to " << timeout_seconds << " s for every task)";
    check(stub_->Register(&context, request, &response), "registration", address_, security_);
    heartbeats_ = std::thread([this] { beat(); });
  }

  void set(const std::string& key, const std::string& value) override {
    pb::SetKeyRequest request;
    request.set_key(key);
    request.set_value(value);
    pb::SetKeyResponse response;
    grpc::ClientContext context;
    add_job_token(context, security_);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    check(stub_->SetKey(&context, request, &response), str_cat("setting key '", key, "'"), address_,
          security_);
  }

  std::string get(const std::string& key, double timeout_seconds) override {
    pb::GetKeyRequest request;
    request.set_key(key);
    request.set_timeout_seconds(timeout_seconds);
    pb::GetKeyResponse response;
    grpc::ClientContext context;
    add_job_token(context, security_);
    context.set_deadline(deadline(timeout_seconds + 5));
    check(stub_->GetKey(&context, request, &response), str_cat("getting key '", key, "'"), address_,
          security_);
    return response.value();
  }

  void wait(const std::vector<std::string>& keys, double timeout_seconds) override {
    auto end = Clock::now() + seconds(timeout_seconds);
    for (const std::string& key : keys) {
      get(key, std::max(0.0, std::chrono::duration<double>(end - Clock::now()).count()));
    }
  }

  void barrier(const std::string& name, double timeout_seconds) override {
    pb::BarrierRequest request;
    request.set_name(name);
    fill(request.mutable_task());
    request.set_timeout_seconds(timeout_seconds);
    pb::BarrierResponse response;
    grpc::ClientContext context;
    add_job_token(context, security_);
    context.set_deadline(deadline(timeout_seconds + 5));
    check(stub_->Barrier(&context, request, &response), str_cat("barrier '", name, "'"), address_,
          security_);
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

 private:
  static std::chrono::system_clock::time_point deadline(double s) {
    return std::chrono::system_clock::now() +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(
               std::chrono::duration<double>(s));
  }
  void fill(pb::Task* task) const {
    task->set_type(task_.type);
    task->set_index(task_.index);
  }

  void beat() {
    auto unreachable_since = Clock::now();
    bool reachable = true;
    MutexLock lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      pb::HeartbeatRequest request;
      fill(request.mutable_task());
      request.set_incarnation(incarnation_);
      pb::HeartbeatResponse response;
      grpc::ClientContext context;
      add_job_token(context, security_);
    add_job_token(context, security_);
      context.set_deadline(deadline(options_.heartbeat_interval_seconds * 3));
      grpc::Status status = stub_->Heartbeat(&context, request, &response);
      lock.lock();
      if (status.ok()) {
        reachable = true;
      } else if (status.error_code() == grpc::StatusCode::ABORTED) {
        if (failure_.empty()) LOG(ERROR) << task_.to_string() << ": " << status.error_message();
        failure_ = status.error_message();
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
      wake_.wait_for(mutex_, seconds(options_.heartbeat_interval_seconds));
    }
  }

  std::string address_;
  TaskId task_;
  CoordinationOptions options_;
  ClusterSecurity security_;
  std::unique_ptr<pb::Coordination::Stub> stub_;
  uint64_t incarnation_ = 0;
  std::thread heartbeats_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::string failure_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace

std::unique_ptr<CoordinationService> CoordinationService::start(const std::string& address,
                                                                std::vector<TaskId> tasks,
                                                                CoordinationOptions options,
                                                                const ClusterSecurity& security) {
  check_security_configured(security, "coordination service");
  auto service = std::make_unique<Service>(std::move(tasks), options, security);
  service->start(address);
  return service;
}

std::unique_ptr<CoordinationClient> CoordinationClient::connect(const std::string& address,
                                                                TaskId task,
                                                                CoordinationOptions options,
                                                                const ClusterSecurity& security) {
  check_security_configured(security, task.to_string());
  return std::make_unique<Client>(address, std::move(task), options, security);
}

}  // namespace cadre
