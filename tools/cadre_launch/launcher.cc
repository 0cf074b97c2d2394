// The cluster's shape (tasks, ports, TF_CONFIG) and the launcher's loop. The parts:
// processes.h (starting, stopping and reaping the tasks), task_output.h (their output),
// restart_policy.h (what happens when a task ends), job_security.h (secrets and PKI),
// stop_signals.h (a planned stop of the whole cluster).
#include "tools/cadre_launch/launcher.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "cadre/base/errors.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "tools/cadre_launch/job_security.h"
#include "tools/cadre_launch/processes.h"
#include "tools/cadre_launch/restart_policy.h"
#include "tools/cadre_launch/stop_signals.h"

namespace cadre::launch {

namespace {

std::vector<Task> tasks_of(const LaunchOptions& o) {
  std::vector<Task> tasks;
  for (int i = 0; i < o.client; ++i) tasks.push_back({"client", i});
  for (int i = 0; i < o.chief; ++i) tasks.push_back({"chief", i});
  for (int i = 0; i < o.workers; ++i) tasks.push_back({"worker", i});
  for (int i = 0; i < o.ps; ++i) tasks.push_back({"ps", i});
  for (int i = 0; i < o.evaluator; ++i) tasks.push_back({"evaluator", i});
  return tasks;
}

// `n` distinct loopback ports free right now (the kernel's choices for port 0). Every socket
// stays bound until all are chosen: closed one by one, the kernel may hand out a port twice
// (two tasks of one TF_CONFIG once got the same address).
std::vector<int> free_ports(size_t n) {
  std::vector<int> fds, ports;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  for (size_t i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (fd >= 0) ::close(fd);
      close_all();
      throw UnavailableError("cadre_launch: cannot bind a loopback port");
    }
    fds.push_back(fd);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ports.push_back(ntohs(addr.sin_port));
  }
  close_all();
  return ports;
}

std::vector<std::string> names_of(const std::vector<Task>& tasks) {
  std::vector<std::string> names;
  for (const Task& t : tasks) names.push_back(t.name());
  return names;
}

// Every task with its environment: its TF_CONFIG on free ports, and what `security` adds.
std::vector<Child> children_of(const LaunchOptions& options, const std::vector<Task>& tasks,
                               const JobSecurity& security) {
  auto configs = tf_configs(options, free_ports(tasks.size()));
  std::vector<Child> children;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Child c{.task = tasks[i], .env = security.env_of(tasks[i].name())};
    c.env["TF_CONFIG"] = configs[i].second;
    children.push_back(std::move(c));
  }
  if (!options.server_command.empty()) {
    children.push_back(Child{.task = {"server", 0}, .command = options.server_command});
  }
  return children;
}

// One budget of cores for the machine: the training tasks share it.
int threads_per_task(const LaunchOptions& options) {
  int trainers = options.chief + options.workers;
  return std::max(1, hardware_threads() / std::max(1, trainers));
}

// A running cluster. Members are destroyed in reverse: the tasks are stopped before the
// job's key files are removed.
class Cluster {
 public:
  explicit Cluster(const LaunchOptions& options)
      : options_(options),
        security_(options.security, names_of(tasks_of(options))),
        processes_(children_of(options, tasks_of(options), security_), options.command,
                   threads_per_task(options), options.grace_secs),
        restarts_(RestartPolicy::make(options_, processes_)) {}

  int run() {
    catch_stop_signals();
    for (Child& c : processes_.children()) processes_.start(c);
    while (true) {
      if (stop_requests() > 0) return shut_down(processes_, stop_signal(), options_.grace_secs);
      processes_.pump_output(200);
      processes_.reap();
      if (std::optional<int> status = restarts_->step()) return *status;
    }
  }

 private:
  LaunchOptions options_;
  JobSecurity security_;
  Processes processes_;
  std::unique_ptr<RestartPolicy> restarts_;
};

void check(const LaunchOptions& options) {
  if (options.chief < 0 || options.chief > 1 || options.evaluator < 0 || options.evaluator > 1 ||
      options.client < 0 || options.client > 1) {
    throw InvalidArgumentError("cadre_launch: --client, --chief and --evaluator take 0 or 1");
  }
  if (options.client == 1 && (options.chief == 1 || options.workers == 0)) {
    throw InvalidArgumentError(
        "cadre_launch: --client=1 drives workers in place of a chief: give --chief=0 and "
        "--workers=N with N >= 1");
  }
  if (!(options.grace_secs > 0 && options.grace_secs <= 3600)) {
    throw InvalidArgumentError(
        str_cat("cadre_launch: --grace_secs=", options.grace_secs, " must be in (0, 3600]"));
  }
  if (options.workers < 0 || options.ps < 0 || options.max_restarts < 0) {
    throw InvalidArgumentError("cadre_launch: --workers, --ps and --max_restarts must be >= 0");
  }
  if (options.chief + options.workers == 0) {
    throw InvalidArgumentError("cadre_launch: the cluster needs a chief or a worker to train");
  }
  if (options.command.empty()) {
    throw InvalidArgumentError("cadre_launch: no program given after --");
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tf_configs(const LaunchOptions& options,
                                                            const std::vector<int>& ports) {
  std::vector<Task> tasks = tasks_of(options);
  std::map<std::string, std::vector<std::string>> jobs;
  for (size_t i = 0; i < tasks.size(); ++i) {
    // Outside the cluster, as the Estimator has it; with a client, inside, so that the client
    // leaves evaluation to it.
    if (tasks[i].type == "evaluator" && options.client == 0) continue;
    jobs[tasks[i].type].push_back(str_cat("\"127.0.0.1:", ports[i], "\""));
  }
  std::string cluster = "{";
  for (const auto& [job, addresses] : jobs) {
    if (cluster.size() > 1) cluster += ", ";
    cluster += str_cat("\"", job, "\": [", join(addresses, ", "), "]");
  }
  cluster += "}";
  std::vector<std::pair<std::string, std::string>> out;
  for (const Task& t : tasks) {
    out.emplace_back(t.name(), str_cat("{\"cluster\": ", cluster, ", \"task\": {\"type\": \"",
                                       t.type, "\", \"index\": ", t.index, "}}"));
  }
  return out;
}

int run_cluster(const LaunchOptions& options) {
  check(options);
  Cluster cluster(options);
  return cluster.run();
}

}  // namespace cadre::launch
