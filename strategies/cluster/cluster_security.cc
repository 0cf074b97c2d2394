#include "cadre/strategies/cluster_security.h"

#include <cstdlib>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/user_secret.h"

namespace cadre {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

void ClusterSecurity::validate() const {
  int set = !ca_file.empty() + !cert_file.empty() + !key_file.empty();
  if (set != 0 && set != 3) {
    throw InvalidArgumentError(
        str_cat("TLS needs the CA, the certificate and the key together; got CA '", ca_file,
                "', certificate '", cert_file, "', key '", key_file, "'"));
  }
}

ClusterSecurity ClusterSecurity::from_environment() {
  ClusterSecurity security;
  security.insecure = variable("CADRE_INSECURE") == "1";
  if (std::string file = variable("CADRE_JOB_SECRET_FILE"); !file.empty()) {
    security.secret = job_secret_file(file);
    security.secret_source = "CADRE_JOB_SECRET_FILE=" + file;
  } else if (std::string secret = variable("CADRE_JOB_SECRET"); !secret.empty()) {
    security.secret = secret;
    security.secret_source = "CADRE_JOB_SECRET";
  } else if (std::string home = variable("HOME"); !security.insecure && !home.empty()) {
    // Only a task that serves or calls needs it (an evaluator does neither): a default that
    // cannot be had is reported when one does (check_security_configured).
    try {
      security.secret = user_secret(home);
      security.secret_source = user_secret_path(home) + " (this user's default)";
    } catch (const Error& e) {
      security.secret_source = str_cat("none (the user's default: ", e.what(), ")");
    }
  }
  security.ca_file = variable("CADRE_TLS_CA");
  security.cert_file = variable("CADRE_TLS_CERT");
  security.key_file = variable("CADRE_TLS_KEY");
  security.bind_host = variable("CADRE_BIND_HOST");
  security.validate();
  return security;
}

}  // namespace cadre
