// A cluster's gRPC service behind a door that checks each call's job token from its
// metadata before a byte of its request is read. gRPC's synchronous and callback unary
// servers read a request whole before any handler (or interceptor) sees the call, and an
// unread request is bounded only by the message limit a service needs for its largest
// callers (a ps task's: a variable's slice); so the door is a generic server that accepts
// every call, refuses a caller without the token at once, reading nothing (HTTP/2 flow
// control then keeps what it sent to one window), and passes the others' requests to the
// service, served in the same process on an in-process channel. An insecure cluster's
// service is served without a door.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "cadre/strategies/cluster_security.h"

namespace cadre {

class GuardedServer {
 public:
  virtual ~GuardedServer();
  // The address clients use ("host:port" with the port bound), and the one listened on
  // (the bind host, or the address's host, and the port).
  virtual const std::string& address() const = 0;
  virtual const std::string& listening() const = 0;
  // Stops taking calls; calls still in flight at `deadline` are cancelled. Idempotent.
  virtual void shutdown(std::chrono::system_clock::time_point deadline) = 0;

  // Serves `service` (which outlives the result) on `address` ("host:port"; port 0: a free
  // one) as `security` requires: on the bind host it names, with its credentials, with
  // SO_REUSEPORT off (gRPC's default would let a second server share the port silently),
  // and only to callers holding the job token unless the cluster is insecure. A refusal is
  // UNAUTHENTICATED, logged at once and then at most every 10 s, naming the peer and
  // `name`. `max_receive_bytes` and `max_send_bytes`: 0 keeps gRPC's limits. Throws
  // UnavailableError "<who>cannot listen on <address> (...)" when it cannot listen.
  static std::unique_ptr<GuardedServer> start(grpc::Service& service, const std::string& address,
                                              const ClusterSecurity& security,
                                              const std::string& who, const std::string& name,
                                              int max_receive_bytes = 0, int max_send_bytes = 0);
};

}  // namespace cadre
