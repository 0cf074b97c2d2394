// What every gRPC service and client of a cluster uses to apply its ClusterSecurity: the
// credentials (mutual TLS, or plain TCP), the job token each call carries, the check each
// handler starts with, and the address a service binds.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "cadre/base/mutex.h"
#include "cadre/strategies/cluster_security.h"

namespace cadre {

// Throws FailedPreconditionError naming `who` and what to set when the cluster has neither a
// secret nor `insecure`; logs once per process when it is insecure.
void check_security_configured(const ClusterSecurity& security, const std::string& who);

std::shared_ptr<grpc::ServerCredentials> server_credentials(const ClusterSecurity& security);
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClusterSecurity& security);

// What a client adds to a refusal's message: where its secret came from, since tasks that
// disagree on it are the usual cause.
std::string refusal_hint(const ClusterSecurity& security);

// The token a client's calls carry, derived from its secret once: a digest per call would
// sit on every training step's pulls and pushes.
class JobToken {
 public:
  explicit JobToken(const ClusterSecurity& security);
  // Adds the token to a call (nothing when the cluster has no secret).
  void add_to(grpc::ClientContext& context) const;

 private:
  std::string token_;
};

// A gRPC server of `service` started on `address` ("host:port"; port 0: a free one) as
// `security` requires: on the bind host it names, with its credentials, and with
// SO_REUSEPORT off (gRPC's default would let a second server share the port silently).
// `max_receive_bytes` and `max_send_bytes`: 0 keeps gRPC's limits. Throws UnavailableError
// "<who>cannot listen on <address> (...)" when it cannot listen.
struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;    // `address` with the port bound
  std::string listening;  // the address bound: the bind host (or `address`'s) and the port
};
StartedServer start_server(grpc::Service& service, const std::string& address,
                           const ClusterSecurity& security, const std::string& who,
                           int max_receive_bytes = 0, int max_send_bytes = 0);

// The check a service's handlers start with. Thread-safe.
class CallerCheck {
 public:
  CallerCheck(const ClusterSecurity& security, std::string service);
  // OK when the caller holds the job token (compared in constant time) or the cluster is
  // insecure; UNAUTHENTICATED otherwise, logged at most every 10 s naming the peer.
  grpc::Status check(const grpc::ServerContext& context) const;

 private:
  std::string token_;  // empty: insecure
  std::string service_;
  mutable Mutex mutex_;
  mutable std::chrono::steady_clock::time_point last_log_ CADRE_GUARDED_BY(mutex_);
  mutable int refused_since_log_ CADRE_GUARDED_BY(mutex_) = 0;
};

}  // namespace cadre
