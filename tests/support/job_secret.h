// The secret the tasks of a test's cluster share: cadre_launch draws one per job, and tests
// that start services or tasks themselves hand them this one.
#pragma once

#include <string>
#include <utility>

#include "cadre/strategies/cluster_security.h"

namespace cadre::testing {

inline constexpr char kJobSecret[] = "a test job's secret";

inline ClusterSecurity test_security() {
  ClusterSecurity security;
  security.secret = kJobSecret;
  return security;
}

// For a task started with TF_CONFIG: CADRE_JOB_SECRET, as RunConfig::from_environment reads it.
inline std::pair<std::string, std::string> job_secret_env() {
  return {"CADRE_JOB_SECRET", kJobSecret};
}

}  // namespace cadre::testing
