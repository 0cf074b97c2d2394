#include "tools/cadre_launch/job_security.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "cadre/base/errors.h"
#include "core/base/process_id.h"
#include "core/base/random_token.h"
#include "core/base/strings.h"
#include "tools/cadre_launch/tls_files.h"

namespace cadre::launch {

namespace {

// The job's keys live in a private folder named for this process, removed at exit; one
// that a launcher killed outright left behind is removed by the next launch.
std::string make_pki_dir() {
  constexpr std::string_view kPrefix = "cadre_launch_pki_";
  std::filesystem::path temp = std::filesystem::temp_directory_path();
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(temp, ignored)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    std::optional<ProcessId> owner = parse_process_token(name.substr(kPrefix.size()));
    if (owner && liveness(*owner) == Liveness::kDead) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  std::string dir = (temp / str_cat(kPrefix, to_token(this_process()))).string();
  if (::mkdir(dir.c_str(), 0700) != 0) {
    throw UnavailableError(str_cat("cadre_launch --tls: cannot make the private directory ", dir));
  }
  return dir;
}

}  // namespace

JobSecurity::JobSecurity(LaunchOptions::Security security, const std::vector<std::string>& tasks) {
  using Security = LaunchOptions::Security;
  bool given = std::getenv("CADRE_JOB_SECRET") || std::getenv("CADRE_JOB_SECRET_FILE") ||
               std::getenv("CADRE_INSECURE");
  if (security == Security::kInsecure) {
    for (const std::string& t : tasks) task_env_[t].emplace("CADRE_INSECURE", "1");
    return;
  }
  std::string secret = given ? "" : random_token();
  for (const std::string& t : tasks) {
    if (!secret.empty()) task_env_[t]["CADRE_JOB_SECRET"] = secret;
  }
  if (security != Security::kTls || std::getenv("CADRE_TLS_CA")) return;
  pki_dir_ = make_pki_dir();
  for (const auto& [task, files] : make_job_pki(pki_dir_, tasks, {"127.0.0.1", "localhost"})) {
    task_env_[task]["CADRE_TLS_CA"] = files.ca;
    task_env_[task]["CADRE_TLS_CERT"] = files.cert;
    task_env_[task]["CADRE_TLS_KEY"] = files.key;
  }
}

JobSecurity::~JobSecurity() {
  if (!pki_dir_.empty()) std::filesystem::remove_all(pki_dir_);
}

std::map<std::string, std::string> JobSecurity::env_of(const std::string& task) const {
  auto found = task_env_.find(task);
  return found == task_env_.end() ? std::map<std::string, std::string>{} : found->second;
}

}  // namespace cadre::launch
