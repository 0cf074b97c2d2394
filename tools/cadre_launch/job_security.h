// How the tasks of a local job authenticate each other (LaunchOptions::security): the
// variables each task's environment gets, and for kTls the job's CA, keys and certificates
// in a private temporary directory that lives as long as this object.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tools/cadre_launch/launcher.h"

namespace cadre::launch {

class JobSecurity {
 public:
  // kInsecure: CADRE_INSECURE=1. kSecret: a fresh CADRE_JOB_SECRET, unless the launcher's
  // environment names a secret (or CADRE_INSECURE), which the tasks then inherit. kTls: that,
  // and CADRE_TLS_{CA,CERT,KEY} made for the job unless CADRE_TLS_CA is set. Throws
  // UnavailableError when the key files cannot be made.
  JobSecurity(LaunchOptions::Security security, const std::vector<std::string>& tasks);
  JobSecurity(const JobSecurity&) = delete;
  JobSecurity& operator=(const JobSecurity&) = delete;
  ~JobSecurity();  // removes the key files

  // What the security adds to the environment of `task` ("type:index").
  std::map<std::string, std::string> env_of(const std::string& task) const;

 private:
  std::map<std::string, std::map<std::string, std::string>> task_env_;
  std::string pki_dir_;  // the job's CA and certificates (kTls)
};

}  // namespace cadre::launch
