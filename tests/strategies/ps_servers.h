// ps tasks on 127.0.0.1 for the tests of ParameterServerStrategy: `count` servers, ps:0 to
// ps:count-1, each holding the job's test secret.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strategies/ps/ps_server.h"
#include "tests/support/job_secret.h"

namespace cadre::testing {

inline std::vector<std::unique_ptr<ps::ParameterServer>> start_ps_servers(int count) {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  for (int i = 0; i < count; ++i) {
    ps::ServerOptions options;
    options.task = "ps:" + std::to_string(i);
    options.security = test_security();
    servers.push_back(ps::ParameterServer::start("127.0.0.1:0", options));
  }
  return servers;
}

}  // namespace cadre::testing
