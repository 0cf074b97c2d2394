// How the tasks of a cluster prove to each other that they belong to the job, and where
// their services listen. Every service a task runs (the chief's coordination service, the
// ps tasks) accepts only callers that present the job's secret, and with TLS only callers
// with a certificate from the job's CA; see docs/SECURITY.md for what each protects.
//
// A cluster must have a secret or say `insecure`: the first service or client of a job
// without either throws FailedPreconditionError naming what to set. The secret never comes
// from TF_CONFIG (which orchestrators and people log); from_environment falls back to the
// user's own (~/.cadre/job_secret) when the job names none.
#pragma once

#include <string>

namespace cadre {

struct ClusterSecurity {
  // The job's shared secret: any bytes, the same on every task. Empty: none.
  std::string secret;
  // Where it came from, for errors that say why two tasks disagree ("CADRE_JOB_SECRET", ...).
  std::string secret_source;
  // Mutual TLS when all three are set: PEM files of the job's CA, of this task's
  // certificate (signed by it, naming the host the others reach it by) and its key.
  std::string ca_file, cert_file, key_file;
  // No authentication at all, on a network where every process is trusted. Said once in
  // the log.
  bool insecure = false;
  // The host services listen on; empty: the host of the task's own TF_CONFIG address. A
  // container advertises one name and binds "0.0.0.0"; nothing binds every interface
  // unless told to.
  std::string bind_host;

  bool tls() const { return !ca_file.empty(); }
  // Throws InvalidArgumentError when only some of the TLS files are set.
  void validate() const;

  // From the process's environment (read at the edge, as RunConfig::from_environment
  // does): CADRE_JOB_SECRET_FILE (a file holding the secret) or else CADRE_JOB_SECRET,
  // CADRE_TLS_CA, CADRE_TLS_CERT, CADRE_TLS_KEY, CADRE_INSECURE=1 and CADRE_BIND_HOST.
  // With neither secret variable nor CADRE_INSECURE: the user's default secret in
  // $HOME/.cadre/job_secret, made on first use, which the user's tasks on hosts sharing the
  // home directory have in common. Throws InvalidArgumentError naming a file that cannot be
  // read, is empty or is open to other users.
  static ClusterSecurity from_environment();
};

}  // namespace cadre
