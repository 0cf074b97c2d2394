// Real jobs under cadre_launch with their protections on: a stranger on the same host that
// reaches a task's port while a job trains is refused and the job finishes; whole
// MultiWorkerMirrored and ParameterServer jobs run over mutual TLS; a client with a
// certificate from another CA is turned away at the handshake.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <string>

#include "cadre/base/errors.h"
#include "core/base/process_id.h"
#include "strategies/cluster/coordination_service.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"
#include "tools/cadre_launch/tls_files.h"

namespace cadre {
namespace {

class SecurityTest : public cadre::testing::TempDirTest {
 protected:
  testing::CommandResult launch(const std::string& tasks, const std::string& flags,
                                const std::function<void(const std::string&)>& on_line,
                                const std::string& env = "") {
    return testing::run_command(env + std::string(CADRE_LAUNCH) + " " + tasks + " -- " +
                                    CADRE_FASHION_MNIST + " --model_dir=" + path("m") +
                                    " --eval_steps=2 --batch_size=64 " + flags + " 2>&1",
                                on_line);
  }
};

// The address a service logged, e.g. "coordination service on 127.0.0.1:4242".
std::string logged_address(const std::string& line, const std::string& what) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(what + " on (127\\.0\\.0\\.1:\\d+)"))) return "";
  return m[1];
}

TEST_F(SecurityTest, AStrangerIsRefusedWhileTheJobTrainsOn) {
  ClusterSecurity stranger;
  stranger.secret = "a guess";
  int refused = 0;
  testing::CommandResult run =
      launch("--chief=1 --workers=1",
             "--strategy=multi_worker_mirrored --max_steps=300 --save_checkpoints_steps=100",
             [&](const std::string& line) {
               std::string address = logged_address(line, "coordination service");
               if (address.empty()) return;
               auto client = CoordinationClient::connect(address, {"worker", 0}, {}, stranger);
               try {
                 client->set("gloo/rank_0", "hijacked");
               } catch (const UnauthenticatedError&) {
                 ++refused;
               }
             });
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
  EXPECT_NE(run.output.find("coordination service: refused 1 call(s) without the job's token, "
                            "the last from ipv4:127.0.0.1:"),
            std::string::npos)
      << testing::tail(run.output);

  // A ps task: its variables are not the stranger's to read.
  refused = 0;
  run = launch("--chief=1 --ps=1", "--strategy=parameter_server --max_steps=300",
               [&](const std::string& line) {
                 std::string address = logged_address(line, "parameter server");
                 if (address.empty()) return;
                 ps::ClientOptions options;
                 options.security = stranger;
                 ps::PsClient client(0, address, options);
                 try {
                   client.pull(testing::pull_request("hidden1/kernel"));
                 } catch (const UnauthenticatedError&) {
                   ++refused;
                 }
               });
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(run.status, 0) << testing::tail(run.output);
}

// The job's keys live in a private folder of the launcher's temporary directory while it
// runs, and are gone afterwards, with any folder a launcher killed outright left behind.
TEST_F(SecurityTest, WholeJobsRunOverMutualTls) {
  std::filesystem::create_directories(path("tmp"));
  ProcessId dead = this_process();
  ++dead.start_ticks;  // this pid, but a process that started at another time
  std::string left_behind = path("tmp/cadre_launch_pki_" + to_token(dead));
  std::filesystem::create_directories(left_behind);
  for (const char* job :
       {"--chief=1 --workers=1 --evaluator=1 --tls|--strategy=multi_worker_mirrored",
        "--chief=1 --workers=1 --ps=1 --tls|--strategy=parameter_server"}) {
    std::string spec = job;
    std::string tasks = spec.substr(0, spec.find('|')), flags = spec.substr(spec.find('|') + 1);
    std::filesystem::remove_all(path("m"));
    bool keys_while_running = false;
    testing::CommandResult run = launch(
        tasks, flags + " --max_steps=200 --save_checkpoints_steps=100",
        [&](const std::string&) {
          for (const auto& entry : std::filesystem::directory_iterator(path("tmp"))) {
            if (entry.path() != left_behind && std::filesystem::exists(entry.path() / "ca.pem")) {
              keys_while_running = true;
            }
          }
        },
        "TMPDIR=" + path("tmp") + " ");
    EXPECT_EQ(run.status, 0) << testing::tail(run.output);
    EXPECT_NE(run.output.find("mutual TLS)"), std::string::npos) << testing::tail(run.output);
    EXPECT_TRUE(keys_while_running);
    EXPECT_TRUE(std::filesystem::is_empty(path("tmp"))) << "keys left behind";
  }
}

TEST_F(SecurityTest, ACertificateFromAnotherCaIsRefused) {
  std::filesystem::create_directories(path("job"));
  std::filesystem::create_directories(path("other"));
  auto job = launch::make_job_pki(path("job"), {"ps:0", "worker:0"}, {"127.0.0.1"});
  auto other = launch::make_job_pki(path("other"), {"worker:0"}, {"127.0.0.1"});
  ps::ServerOptions options;
  options.security = testing::test_security();
  options.security.ca_file = job["ps:0"].ca;
  options.security.cert_file = job["ps:0"].cert;
  options.security.key_file = job["ps:0"].key;
  auto server = ps::ParameterServer::start("127.0.0.1:0", options);

  ps::ClientOptions member;
  member.security = testing::test_security();
  member.security.ca_file = job["worker:0"].ca;
  member.security.cert_file = job["worker:0"].cert;
  member.security.key_file = job["worker:0"].key;
  ps::PsClient client(0, server->address(), member);
  EXPECT_NO_THROW(client.wait_until_ready(10));
  EXPECT_THROW(client.pull(testing::pull_request("nothing yet")), NotFoundError);

  // The right secret, but a certificate the job's CA never signed (trusting the job's CA).
  ps::ClientOptions outsider = member;
  outsider.security.cert_file = other["worker:0"].cert;
  outsider.security.key_file = other["worker:0"].key;
  ps::PsClient intruder(0, server->address(), outsider);
  EXPECT_THROW(intruder.wait_until_ready(2), DeadlineExceededError);
  // And no certificate at all.
  ps::ClientOptions plain;
  plain.security = testing::test_security();
  ps::PsClient plaintext(0, server->address(), plain);
  EXPECT_THROW(plaintext.pull(testing::pull_request("x")), UnavailableError);
}

}  // namespace
}  // namespace cadre
