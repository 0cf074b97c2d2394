#include "strategies/cluster/guarded_server.h"

#include <glog/logging.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/strings.h"
#include "strategies/cluster/grpc_security.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;

// Who may call: the job token in the call's metadata, unless the cluster is insecure.
// Refusals are logged at once, and then at most every 10 s, as a count; what is still
// uncounted when the server stops is logged then. Thread-safe.
class CallerCheck {
 public:
  CallerCheck(const ClusterSecurity& security, std::string name)
      : token_(security), insecure_(security.insecure), name_(std::move(name)) {}
  ~CallerCheck() { flush(); }

  grpc::Status check(const grpc::GenericCallbackServerContext& context) {
    if (insecure_ || token_.held_by(context.client_metadata())) return grpc::Status::OK;
    {
      MutexLock lock(mutex_);
      ++refused_;
      last_peer_ = context.peer();
      if (!logged_once_ || Clock::now() - last_log_ >= std::chrono::seconds(10)) log();
    }
    return {grpc::StatusCode::UNAUTHENTICATED,
            str_cat(name_, " accepts only the tasks of its job (no valid job token)")};
  }

  void flush() {
    MutexLock lock(mutex_);
    if (refused_ > 0) log();
  }

 private:
  void log() CADRE_REQUIRES(mutex_) {
    LOG(WARNING) << name_ << ": refused " << refused_ << " call(s) without the job's token"
                 << (logged_once_ ? " since the last report" : "") << ", the last from "
                 << last_peer_;
    refused_ = 0;
    logged_once_ = true;
    last_log_ = Clock::now();
  }

  const JobToken token_;
  const bool insecure_;
  const std::string name_;
  Mutex mutex_;
  int refused_ CADRE_GUARDED_BY(mutex_) = 0;
  bool logged_once_ CADRE_GUARDED_BY(mutex_) = false;
  Clock::time_point last_log_ CADRE_GUARDED_BY(mutex_);
  std::string last_peer_ CADRE_GUARDED_BY(mutex_);
};

// A refused call: finished before anything is read.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// An admitted call: its request read, passed to the service on the in-process channel, and
// the service's answer (trailing metadata included) passed back. A cancellation by the
// caller cancels the service's call.
class Passage final : public grpc::ServerGenericBidiReactor {
 public:
  Passage(grpc::GenericStub& service, grpc::GenericCallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish({grpc::StatusCode::CANCELLED, "the call ended before its request arrived"});
      return;
    }
    if (context_->deadline() != std::chrono::system_clock::time_point::max()) {
      inner_.set_deadline(context_->deadline());
    }
    {
      MutexLock lock(mutex_);
      if (cancelled_) {
        Finish({grpc::StatusCode::CANCELLED, "the caller cancelled the call"});
        return;
      }
      started_ = true;
    }
    service_.UnaryCall(&inner_, context_->method(), grpc::StubOptions(), &request_, &response_,
                       [this](grpc::Status status) { relay(status); });
  }

  void OnCancel() override {
    MutexLock lock(mutex_);
    cancelled_ = true;
    // Before the call starts, TryCancel cancels it as it starts.
    if (started_) inner_.TryCancel();
  }

  void OnDone() override { delete this; }

 private:
  void relay(const grpc::Status& status) {
    for (const auto& [key, value] : inner_.GetServerTrailingMetadata()) {
      context_->AddTrailingMetadata(std::string(key.data(), key.size()),
                                    std::string(value.data(), value.size()));
    }
    if (status.ok()) {
      StartWriteAndFinish(&response_, grpc::WriteOptions(), status);
    } else {
      Finish(status);
    }
  }

  grpc::GenericStub& service_;
  grpc::GenericCallbackServerContext* context_;
  grpc::ClientContext inner_;
  grpc::ByteBuffer request_, response_;
  Mutex mutex_;
  bool cancelled_ CADRE_GUARDED_BY(mutex_) = false;
  bool started_ CADRE_GUARDED_BY(mutex_) = false;
};

class Door final : public grpc::CallbackGenericService {
 public:
  Door(const ClusterSecurity& security, std::string name) : callers_(security, std::move(name)) {}

  void open(std::unique_ptr<grpc::GenericStub> service) { service_ = std::move(service); }
  void flush_log() { callers_.flush(); }

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    grpc::Status denied = callers_.check(*context);
    if (!denied.ok()) return new Refusal(denied);
    return new Passage(*service_, context);
  }

 private:
  CallerCheck callers_;
  std::unique_ptr<grpc::GenericStub> service_;
};

class Guarded final : public GuardedServer {
 public:
  Guarded(const ClusterSecurity& security, const std::string& name) : door_(security, name) {}
  ~Guarded() override { shutdown(std::chrono::system_clock::now()); }

  void start(grpc::Service& service, const std::string& address, const ClusterSecurity& security,
             const std::string& who, int max_receive_bytes, int max_send_bytes) {
    grpc::ServerBuilder builder;
    if (security.insecure) {
      // Every caller is admitted: no door, and no hop through one.
      builder.RegisterService(&service);
    } else {
      // The service itself, reachable only through the door.
      grpc::ServerBuilder inner;
      inner.RegisterService(&service);
      if (max_receive_bytes > 0) inner.SetMaxReceiveMessageSize(max_receive_bytes);
      if (max_send_bytes > 0) inner.SetMaxSendMessageSize(max_send_bytes);
      inner_ = inner.BuildAndStart();
      if (!inner_) throw InternalError(str_cat(who, "could not be built"));
      grpc::ChannelArguments channel;
      channel.SetMaxReceiveMessageSize(-1);  // the door's limits apply
      channel.SetMaxSendMessageSize(-1);
      door_.open(std::make_unique<grpc::GenericStub>(inner_->InProcessChannel(channel)));
      builder.RegisterCallbackGenericService(&door_);
    }
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    if (max_receive_bytes > 0) builder.SetMaxReceiveMessageSize(max_receive_bytes);
    if (max_send_bytes > 0) builder.SetMaxSendMessageSize(max_send_bytes);
    std::string listen = security.bind_host.empty()
                             ? address
                             : security.bind_host + address.substr(address.rfind(':'));
    int port = 0;
    builder.AddListeningPort(listen, server_credentials(security), &port);
    outer_ = builder.BuildAndStart();
    if (!outer_ || port == 0) {
      throw UnavailableError(str_cat(who, "cannot listen on ", listen,
                                     " (the port is in use, or the address is not this host's)"));
    }
    address_ = address.substr(0, address.rfind(':') + 1) + std::to_string(port);
    listening_ = listen.substr(0, listen.rfind(':') + 1) + std::to_string(port);
  }

  const std::string& address() const override { return address_; }
  const std::string& listening() const override { return listening_; }

  void shutdown(std::chrono::system_clock::time_point deadline) override {
    MutexLock lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    // The door first: its calls in flight end as the service's do, or are cancelled at the
    // deadline, which cancels the service's.
    if (outer_) outer_->Shutdown(deadline);
    if (inner_) inner_->Shutdown(deadline);
    door_.flush_log();
  }

 private:
  Door door_;
  std::unique_ptr<grpc::Server> inner_, outer_;
  std::string address_, listening_;
  Mutex mutex_;
  bool shut_down_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace

GuardedServer::~GuardedServer() = default;

std::unique_ptr<GuardedServer> GuardedServer::start(grpc::Service& service,
                                                    const std::string& address,
                                                    const ClusterSecurity& security,
                                                    const std::string& who, const std::string& name,
                                                    int max_receive_bytes, int max_send_bytes) {
  auto server = std::make_unique<Guarded>(security, name);
  server->start(service, address, security, who, max_receive_bytes, max_send_bytes);
  return server;
}

}  // namespace cadre
