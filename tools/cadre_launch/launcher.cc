#include "tools/cadre_launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "core/base/errors.h"
#include "core/base/strings.h"
#include "core/runtime/threading.h"

namespace cadre::launch {

namespace {

struct Task {
  std::string type;
  int index = 0;
  std::string name() const { return str_cat(type, ":", index); }
  bool trains() const { return type == "chief" || type == "worker"; }
};

std::vector<Task> tasks_of(const LaunchOptions& o) {
  std::vector<Task> tasks;
  for (int i = 0; i < o.chief; ++i) tasks.push_back({"chief", i});
  for (int i = 0; i < o.workers; ++i) tasks.push_back({"worker", i});
  for (int i = 0; i < o.ps; ++i) tasks.push_back({"ps", i});
  for (int i = 0; i < o.evaluator; ++i) tasks.push_back({"evaluator", i});
  return tasks;
}

// A loopback port free right now (the kernel's choice for port 0).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    throw UnavailableError("cadre_launch: cannot bind a loopback port");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Child {
  Task task;
  pid_t pid = -1;
  int out = -1;         // the read end of its stdout and stderr
  std::string partial;  // output not yet ended by a newline
  bool done = false;
  int status = 0;
};

void print_line(const std::string& prefix, const std::string& line) {
  std::string text = prefix + line + "\n";
  ::fwrite(text.data(), 1, text.size(), stdout);
  ::fflush(stdout);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tf_configs(const LaunchOptions& options,
                                                            const std::vector<int>& ports) {
  std::vector<Task> tasks = tasks_of(options);
  std::map<std::string, std::vector<std::string>> jobs;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].type == "evaluator") continue;  // outside the cluster, as the Estimator has it
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

namespace {

class Cluster {
 public:
  explicit Cluster(const LaunchOptions& options) : options_(options) {
    std::vector<Task> tasks = tasks_of(options);
    std::vector<int> ports;
    for (size_t i = 0; i < tasks.size(); ++i) ports.push_back(free_port());
    auto configs = tf_configs(options, ports);
    int trainers = options.chief + options.workers;
    // One budget of cores for the machine: the training tasks share it.
    threads_ = std::max(1, hardware_threads() / std::max(1, trainers));
    for (size_t i = 0; i < tasks.size(); ++i) {
      children_.push_back({tasks[i]});
      tf_config_[tasks[i].name()] = configs[i].second;
    }
  }

  ~Cluster() { kill_all(); }

  int run() {
    for (Child& c : children_) start(c);
    int restarts = 0;
    while (true) {
      pump_output(200);
      reap();
      bool failed_training = false, failed_other = false;
      for (Child& c : children_) {
        if (!c.done || c.status == 0) continue;
        if (c.task.trains())
          failed_training = true;
        else
          failed_other = true;
      }
      if (failed_training && restarts < options_.max_restarts) {
        ++restarts;
        print_line("", str_cat("cadre_launch: a training task failed; restarting the training "
                               "tasks together (restart ",
                               restarts, " of ", options_.max_restarts, ")"));
        for (Child& c : children_) {
          if (c.task.trains()) stop(c);
        }
        for (Child& c : children_) {
          if (c.task.trains()) start(c);
        }
        continue;
      }
      if (failed_training || failed_other) {
        for (const Child& c : children_) {
          if (c.done && c.status != 0) {
            print_line("", str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status),
                                   "); stopping the cluster"));
          }
        }
        kill_all();
        return 1;
      }
      bool finished = true;
      for (const Child& c : children_) {
        if (c.task.type != "ps" && !c.done) finished = false;
      }
      if (finished) {
        kill_all();  // the ps tasks serve until training ends
        return 0;
      }
    }
  }

 private:
  static std::string describe(int status) {
    if (WIFEXITED(status)) return str_cat("exit status ", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return str_cat("killed by signal ", WTERMSIG(status));
    return "stopped";
  }

  void start(Child& c) {
    int fds[2];
    if (::pipe(fds) != 0) throw UnavailableError("cadre_launch: pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::setpgid(0, 0);
      ::setenv("TF_CONFIG", tf_config_[c.task.name()].c_str(), 1);
      if (!std::getenv("CADRE_NUM_THREADS")) {
        ::setenv("CADRE_NUM_THREADS", std::to_string(threads_).c_str(), 1);
      }
      ::setenv("GOMP_SPINCOUNT", "1000", 0);
      std::vector<char*> argv;
      for (const std::string& a : options_.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "cadre_launch: cannot run %s\n", argv[0]);
      ::_exit(127);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    c.pid = pid;
    c.out = fds[0];
    c.done = false;
    c.status = 0;
    c.partial.clear();
    print_line("", str_cat("started ", c.task.name(), " pid=", pid));
  }

  void stop(Child& c) {
    if (!c.done && c.pid > 0) {
      ::kill(-c.pid, SIGTERM);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
          c.done = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!c.done) {
        ::kill(-c.pid, SIGKILL);
        ::waitpid(c.pid, &c.status, 0);
        c.done = true;
      }
    }
    drain(c);
    if (c.out >= 0) ::close(c.out);
    c.out = -1;
  }

  void kill_all() {
    for (Child& c : children_) stop(c);
  }

  void drain(Child& c) {
    if (c.out < 0) return;
    char buffer[4096];
    while (true) {
      ssize_t n = ::read(c.out, buffer, sizeof buffer);
      if (n <= 0) break;
      c.partial.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = c.partial.find('\n')) != std::string::npos) {
        print_line("[" + c.task.name() + "] ", c.partial.substr(0, newline));
        c.partial.erase(0, newline + 1);
      }
    }
  }

  void pump_output(int timeout_ms) {
    std::vector<pollfd> fds;
    for (Child& c : children_) {
      if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return;
    }
    ::poll(fds.data(), fds.size(), timeout_ms);
    for (Child& c : children_) drain(c);
  }

  void reap() {
    for (Child& c : children_) {
      if (c.done || c.pid <= 0) continue;
      if (::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.done = true;
        drain(c);
        if (!c.partial.empty()) print_line("[" + c.task.name() + "] ", c.partial);
        c.partial.clear();
      }
    }
  }

  LaunchOptions options_;
  std::vector<Child> children_;
  std::map<std::string, std::string> tf_config_;
  int threads_ = 1;
};

}  // namespace

int run_cluster(const LaunchOptions& options) {
  if (options.chief < 0 || options.chief > 1 || options.evaluator < 0 || options.evaluator > 1) {
    throw InvalidArgumentError("cadre_launch: --chief and --evaluator take 0 or 1");
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
  Cluster cluster(options);
  return cluster.run();
}

}  // namespace cadre::launch
