// What every gRPC service and client of a cluster uses to apply its ClusterSecurity: the
// credentials (mutual TLS, or plain TCP) and the job token each call carries, which a
// service's door checks (guarded_server.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

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
  // Whether a call's metadata carries this token (compared in constant time); never when
  // the cluster has no secret.
  bool held_by(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

 private:
  std::string token_;
};

}  // namespace cadre
