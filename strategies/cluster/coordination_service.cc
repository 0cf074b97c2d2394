#include "strategies/cluster/coordination_service.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <set>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/clock.h"
#include "core/base/strings.h"
#include "strategies/cluster/coordination.grpc.pb.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/cluster/guarded_server.h"
#include "strategies/cluster/membership.h"

namespace cadre {

namespace pb = cadre::coordination;
using Clock = std::chrono::steady_clock;

namespace {

std::string name_of(const pb::Task& task) { return str_cat(task.type(), ":", task.index()); }

constexpr int kMaxMessageBytes = 1 << 20;

class Service final : public pb::Coordination::Service, public CoordinationService {
 public:
  Service(std::vector<TaskId> tasks, CoordinationOptions options, const ClusterSecurity& security)
      : options_(options), security_(security), membership_(tasks) {
    for (const TaskId& t : tasks) expected_.insert(t.to_string());
  }
  ~Service() override { stop(); }

  void start(const std::string& address) {
    // Requests are small (keys and rendezvous records); anything larger is refused.
    server_ =
        GuardedServer::start(*this, address, security_,
                             "coordination service: ", "coordination service", kMaxMessageBytes);
    address_ = server_->address();
    monitor_ = std::thread([this] { monitor(); });
    LOG(INFO) << "coordination service on " << address_ << " for " << names(expected_)
              << " (listening on " << server_->listening()
              << (security_.tls() ? ", mutual TLS)" : ")");
  }

  std::string address() const override { return address_; }

  std::string failure() const override {
    MutexLock lock(mutex_);
    return failure_;
  }

  bool barrier_complete(const std::string& name) const override {
    MutexLock lock(mutex_);
    return waiting_at(name).empty();
  }

  bool formed() const override {
    MutexLock lock(mutex_);
    return complete();
  }

  void request_planned_stop() override {
    MutexLock lock(mutex_);
    if (planned_stop_requested_) return;
    planned_stop_requested_ = true;
    LOG(INFO) << "coordination service: asking " << names(expected_) << " for a planned stop";
    changed_.notify_all();
  }

  bool stopped_as_planned() const override {
    MutexLock lock(mutex_);
    return every_task_stopped_as_planned();
  }

  void begin_round() override {
    MutexLock lock(mutex_);
    new_round();
  }

  void linger_after_failure(const std::string& host, double seconds) override {
    MutexLock lock(mutex_);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
    auto everyone_told = [&]() CADRE_REQUIRES(mutex_) {
      for (const std::string& task : expected_) {
        if (task != host && !told_.count(task)) return false;
      }
      return true;
    };
    while (!failure_.empty() && !stopping_ && !everyone_told()) {
      if (!changed_.wait_until(mutex_, deadline)) return;
    }
  }

  void stop() override {
    {
      MutexLock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    changed_.notify_all();
    if (server_) server_->shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (monitor_.joinable()) monitor_.join();
  }

  grpc::Status Register(grpc::ServerContext* context, const pb::RegisterRequest* request,
                        pb::RegisterResponse* response) override {
    std::string task = name_of(request->task());
    MutexLock lock(mutex_);
    if (!expected_.count(task)) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              str_cat("task ", task, " is not in the cluster (", names(expected_), ")")};
    }
    // The host stops too (a planned stop; a death in an elastic group before its first step):
    // its successor at the same address serves the restarted task, which registers again.
    auto known = incarnation_.find(task);
    const bool restarted = known != incarnation_.end() && known->second != request->incarnation();
    if ((planned_stop_requested_ && !is_current(task, request->incarnation())) ||
        (options_.elastic && restarted && complete() && !elastic_formed() &&
         !every_task_stopped_as_planned())) {
      while (!stopping_) changed_.wait(mutex_);
      return {grpc::StatusCode::UNAVAILABLE, "the coordination service stopped (its host did)"};
    }
    if (elastic_formed()) {
      // A restarted task, or one the group went on without: admitted at once.
      incarnation_[task] = request->incarnation();
      heartbeat_[task] = Clock::now();
      publish_view(str_cat("task ", task, " registered"));
      response->set_view_generation(membership_.generation());
      return status_locked();
    }
    if (restarted && complete()) {
      if (every_task_stopped_as_planned()) {
        LOG(INFO) << "coordination service: " << task << " is back after a planned stop of "
                  << "every task; their registrations form round " << round_ + 1;
        new_round();
      } else {
        fail(str_cat("task ", task, " restarted after the cluster had formed"));
      }
    }
    incarnation_[task] = request->incarnation();
    heartbeat_[task] = Clock::now();
    if (options_.elastic && complete() && membership_.generation() == 0) {
      publish_view("every task registered");
    }
    changed_.notify_all();
    auto deadline = Clock::now() + from_seconds(request->timeout_seconds());
    while (!complete() && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) && !complete()) {
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                str_cat("registration timed out after ", request->timeout_seconds(),
                        " s: tasks that never registered: ", names(missing()),
                        " (registered: ", names(registered()), ")")};
      }
    }
    response->set_view_generation(membership_.generation());
    return status_locked();
  }

  grpc::Status Heartbeat(grpc::ServerContext* context, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse* response) override {
    MutexLock lock(mutex_);
    std::string task = name_of(request->task());
    if (failure_.empty() && !is_current(task, request->incarnation())) {
      // A task of an earlier round (begin_round), or replaced by a restarted one: it stops.
      return not_registered(task);
    }
    heartbeat_[task] = Clock::now();
    membership_.note_broken(request->broken_generation());
    if (!failure_.empty()) {
      told_.insert(task);
      changed_.notify_all();
    }
    response->set_planned_stop(planned_stop_requested_);
    response->set_view_generation(membership_.generation());
    return status_locked();
  }

  grpc::Status SetKey(grpc::ServerContext* context, const pb::SetKeyRequest* request,
                      pb::SetKeyResponse*) override {
    MutexLock lock(mutex_);
    store_[request->key()] = request->value();
    changed_.notify_all();
    return status_locked();
  }

  grpc::Status GetKey(grpc::ServerContext* context, const pb::GetKeyRequest* request,
                      pb::GetKeyResponse* response) override {
    MutexLock lock(mutex_);
    auto deadline = Clock::now() + from_seconds(request->timeout_seconds());
    while (!store_.count(request->key()) && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) && !store_.count(request->key())) {
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

  grpc::Status ReportError(grpc::ServerContext* context, const pb::ReportErrorRequest* request,
                           pb::ReportErrorResponse*) override {
    MutexLock lock(mutex_);
    std::string task = name_of(request->task());
    if (!is_current(task, request->incarnation())) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              str_cat("task ", task,
                      " is not registered in this round of the coordination "
                      "service")};
    }
    // Bounded: it goes into every task's log and error.
    constexpr size_t kMaxMessage = 2000;
    std::string message = request->message().substr(0, kMaxMessage);
    if (request->message().size() > kMaxMessage) message += "...";
    fail(str_cat("task ", task, " failed: ", message));
    return grpc::Status::OK;
  }

  grpc::Status Barrier(grpc::ServerContext* context, const pb::BarrierRequest* request,
                       pb::BarrierResponse*) override {
    MutexLock lock(mutex_);
    std::string task = name_of(request->task());
    // A task of an earlier round (begin_round) must not count toward this round's barrier.
    if (failure_.empty() && !incarnation_.count(task)) return not_registered(task);
    const std::string& name = request->name();
    barriers_[name].insert(task);
    changed_.notify_all();
    const int round = round_;  // a new round forgets the barriers
    auto deadline = Clock::now() + from_seconds(request->timeout_seconds());
    while (round_ == round && !waiting_at(name).empty() && failure_.empty() && !stopping_) {
      if (!changed_.wait_until(mutex_, deadline) && !waiting_at(name).empty()) {
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                str_cat("barrier '", name, "' timed out after ", request->timeout_seconds(),
                        " s: waiting for ", names(waiting_at(name)))};
      }
    }
    if (round_ != round) return not_registered(task);
    // Passed, even when the service stops before this call sees it: the task that hosts it
    // passed too, and stopping is how it leaves.
    if (failure_.empty() && waiting_at(name).empty()) return grpc::Status::OK;
    return status_locked();
  }

 private:
  // Forgets every registration, heartbeat, key, barrier and the failure.
  void new_round() CADRE_REQUIRES(mutex_) {
    incarnation_.clear();
    heartbeat_.clear();
    told_.clear();
    store_.clear();
    barriers_.clear();
    failure_.clear();
    membership_.reset();
    ++round_;
    LOG(INFO) << "coordination service: round " << round_ << "; waiting for " << names(expected_)
              << " to register again";
    changed_.notify_all();
  }

  bool complete() const CADRE_REQUIRES(mutex_) { return incarnation_.size() == expected_.size(); }
  // Whether every task passed the planned stop's barrier in this round.
  bool every_task_stopped_as_planned() const CADRE_REQUIRES(mutex_) {
    return waiting_at(kPlannedStopBarrier).empty();
  }
  // Whether the group is elastic and has taken its first step (before, its members are
  // still making their variables together, and a death fails the cluster): its members are
  // those of membership_, and they go on when one dies.
  bool elastic_formed() const CADRE_REQUIRES(mutex_) {
    return options_.elastic && membership_.generation() > 0 && store_.count(kGroupSteppedKey);
  }
  // Those barrier `name` still waits for: the tasks (the members of an elastic group) that
  // have not arrived.
  std::set<std::string> waiting_at(const std::string& name) const CADRE_REQUIRES(mutex_) {
    auto it = barriers_.find(name);
    return not_in(elastic_formed() ? membership_.members() : membership_.order(),
                  it == barriers_.end() ? std::set<std::string>{} : it->second);
  }
  // A new generation of an elastic group: the tasks registered now.
  void publish_view(const std::string& reason) CADRE_REQUIRES(mutex_) {
    auto [key, value] = membership_.change(registered());
    store_[key] = value;
    LOG(INFO) << "coordination service: " << reason << "; the worker group's generation "
              << membership_.generation() << " is " << value;
    changed_.notify_all();
  }
  std::set<std::string> registered() const CADRE_REQUIRES(mutex_) {
    std::set<std::string> out;
    for (const auto& [task, incarnation] : incarnation_) out.insert(task);
    return out;
  }
  // Whether `task` registered in this round as this incarnation of its process.
  bool is_current(const std::string& task, uint64_t incarnation) const CADRE_REQUIRES(mutex_) {
    auto known = incarnation_.find(task);
    return known != incarnation_.end() && known->second == incarnation;
  }
  std::set<std::string> missing() const CADRE_REQUIRES(mutex_) {
    return not_in(membership_.order(), registered());
  }
  void fail(const std::string& reason) CADRE_REQUIRES(mutex_) {
    if (!failure_.empty()) return;
    failure_ = reason;
    LOG(ERROR) << "coordination service: " << reason << "; every task is told to stop";
    changed_.notify_all();
  }
  grpc::Status not_registered(const std::string& task) const CADRE_REQUIRES(mutex_) {
    return {grpc::StatusCode::ABORTED,
            elastic_formed()
                ? str_cat("the elastic worker group went on without task ", task,
                          " (declared dead, or replaced by a restart); restart it to rejoin")
                : str_cat("task ", task,
                          " is not registered in this round of the coordination service (the "
                          "collective was restarted)")};
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
          now - last_log > from_seconds(options_.log_every_seconds)) {
        LOG(INFO) << "coordination service: waiting for " << names(missing())
                  << " to register (registered: " << names(registered()) << ")";
        last_log = now;
      }
      // Tasks that stopped as planned fall silent until they are restarted.
      if (!(complete() || elastic_formed()) || !failure_.empty() ||
          every_task_stopped_as_planned()) {
        continue;
      }
      for (const auto& [task, last] : heartbeat_) {
        double silent = std::chrono::duration<double>(now - last).count();
        if (elastic_formed() && silent > membership_.silence_allowed(options_)) {
          std::string gone = task;  // erased below
          incarnation_.erase(gone);
          heartbeat_.erase(gone);
          publish_view(str_cat("task ", gone, " has sent no heartbeat for ",
                               static_cast<int>(silent), " s: the group goes on without it"));
          break;
        }
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
  std::set<std::string> expected_;
  std::string address_;
  std::unique_ptr<GuardedServer> server_;
  std::thread monitor_;
  mutable Mutex mutex_;
  CondVar changed_;
  std::map<std::string, uint64_t> incarnation_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, Clock::time_point> heartbeat_ CADRE_GUARDED_BY(mutex_);
  std::set<std::string> told_ CADRE_GUARDED_BY(mutex_);  // heartbeats answered with the failure
  std::map<std::string, std::string> store_ CADRE_GUARDED_BY(mutex_);
  std::map<std::string, std::set<std::string>> barriers_ CADRE_GUARDED_BY(mutex_);
  std::string failure_ CADRE_GUARDED_BY(mutex_);
  Membership membership_ CADRE_GUARDED_BY(mutex_);
  bool stopping_ CADRE_GUARDED_BY(mutex_) = false;
  bool planned_stop_requested_ CADRE_GUARDED_BY(mutex_) = false;
  int round_ CADRE_GUARDED_BY(mutex_) = 1;
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

}  // namespace cadre
