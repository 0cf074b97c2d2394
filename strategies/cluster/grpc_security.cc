#include "strategies/cluster/grpc_security.h"

#include <glog/logging.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <atomic>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

constexpr char kTokenKey[] = "x-cadre-job-token";

// What calls carry: a digest of the secret, not the secret (which may be used elsewhere).
std::string job_token(const std::string& secret) {
  static constexpr char kContext[] = "cadre job token v1:";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  EVP_DigestUpdate(context, kContext, sizeof(kContext) - 1);
  EVP_DigestUpdate(context, secret.data(), secret.size());
  EVP_DigestFinal_ex(context, digest, &size);
  EVP_MD_CTX_free(context);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

std::string read_pem(const std::string& path, const char* what) {
  // Env reads with read(2): a directory is a clean error (a stream would throw from its
  // buffer with "basic_filebuf::underflow").
  std::string text;
  try {
    text = posix_env()->read_file(path);
  } catch (const Error& e) {
    throw InvalidArgumentError(str_cat("TLS ", what, " ", path, " cannot be read: ", e.what()));
  }
  if (text.find("-----BEGIN") == std::string::npos) {
    throw InvalidArgumentError(str_cat("TLS ", what, " ", path, " is not a PEM file"));
  }
  return text;
}

}  // namespace

void check_security_configured(const ClusterSecurity& security, const std::string& who) {
  security.validate();
  if (security.insecure) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      LOG(WARNING) << who << ": the cluster is insecure (CADRE_INSECURE=1): its services "
                   << "accept any caller that reaches their ports";
    }
    return;
  }
  if (security.secret.empty()) {
    throw FailedPreconditionError(
        str_cat(who,
                ": the cluster has no secret; give every task the same one in a file named by "
                "CADRE_JOB_SECRET_FILE (or in CADRE_JOB_SECRET), as cadre_launch does, or set "
                "CADRE_INSECURE=1 on a network where every process is trusted",
                security.secret_source.empty() ? "" : str_cat(" [", security.secret_source, "]")));
  }
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const ClusterSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = read_pem(security.ca_file, "CA");
  options.pem_key_cert_pairs.push_back(
      {read_pem(security.key_file, "key"), read_pem(security.cert_file, "certificate")});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClusterSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read_pem(security.ca_file, "CA");
  options.pem_private_key = read_pem(security.key_file, "key");
  options.pem_cert_chain = read_pem(security.cert_file, "certificate");
  return grpc::SslCredentials(options);
}

std::string refusal_hint(const ClusterSecurity& security) {
  return str_cat("; this task's secret comes from ",
                 security.secret_source.empty() ? "its ClusterSecurity" : security.secret_source,
                 ", and every task of the job needs the same one (CADRE_JOB_SECRET_FILE)");
}

JobToken::JobToken(const ClusterSecurity& security)
    : token_(security.secret.empty() ? std::string() : job_token(security.secret)) {}

void JobToken::add_to(grpc::ClientContext& context) const {
  if (!token_.empty()) context.AddMetadata(kTokenKey, token_);
}

bool JobToken::held_by(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (token_.empty()) return false;
  auto it = metadata.find(kTokenKey);
  return it != metadata.end() && it->second.size() == token_.size() &&
         CRYPTO_memcmp(it->second.data(), token_.data(), token_.size()) == 0;
}

}  // namespace cadre
