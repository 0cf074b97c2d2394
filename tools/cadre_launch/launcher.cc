#include "tools/cadre_launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/runtime/threading.h"
#include "core/base/process_id.h"
#include "core/base/random_token.h"
#include "core/base/strings.h"
#include "tools/cadre_launch/tls_files.h"

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

struct Child {
  Task task;
  pid_t pid = -1;
  int out = -1;           // the read end of its stdout and stderr
  std::string partial{};  // output not yet ended by a newline
  bool done = false;
  int status = 0;
  bool reported = false;  // its failure was told (and the cluster went on without it)
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

namespace {

// The signal that asked the launcher to stop (0: none) and how many such signals came.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_stop_requests = 0;

void on_stop_signal(int signal) {
  g_stop_signal = signal;
  g_stop_requests = g_stop_requests + 1;
}

// No SA_RESTART: a signal wakes poll() at once.
void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

// A task that exited after a planned stop, asking to be run again.
bool stopped_for_restart(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == kRestartExitCode;
}

class Cluster {
 public:
  explicit Cluster(const LaunchOptions& options) : options_(options), launcher_(::getpid()) {
    std::vector<Task> tasks = tasks_of(options);
    std::vector<int> ports = free_ports(tasks.size());
    auto configs = tf_configs(options, ports);
    int trainers = options.chief + options.workers;
    // One budget of cores for the machine: the training tasks share it.
    threads_ = std::max(1, hardware_threads() / std::max(1, trainers));
    for (size_t i = 0; i < tasks.size(); ++i) {
      children_.push_back(Child{.task = tasks[i]});
      tf_config_[tasks[i].name()] = configs[i].second;
    }
    set_up_security(tasks);
  }

  ~Cluster() {
    kill_all();
    if (!pki_dir_.empty()) std::filesystem::remove_all(pki_dir_);
  }

  // The job's keys live in a private folder named for this process, removed at exit; one
  // that a launcher killed outright left behind is removed by the next launch.
  static std::string make_pki_dir() {
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
      throw UnavailableError(
          str_cat("cadre_launch --tls: cannot make the private directory ", dir));
    }
    return dir;
  }

  void set_up_security(const std::vector<Task>& tasks) {
    using Security = LaunchOptions::Security;
    bool given = std::getenv("CADRE_JOB_SECRET") || std::getenv("CADRE_JOB_SECRET_FILE") ||
                 std::getenv("CADRE_INSECURE");
    if (options_.security == Security::kInsecure) {
      for (const Task& t : tasks) task_env_[t.name()]["CADRE_INSECURE"] = "1";
      return;
    }
    std::string secret = given ? "" : random_token();
    for (const Task& t : tasks) {
      if (!secret.empty()) task_env_[t.name()]["CADRE_JOB_SECRET"] = secret;
    }
    if (options_.security != Security::kTls || std::getenv("CADRE_TLS_CA")) return;
    pki_dir_ = make_pki_dir();
    std::vector<std::string> names;
    for (const Task& t : tasks) names.push_back(t.name());
    for (const auto& [task, files] : make_job_pki(pki_dir_, names, {"127.0.0.1", "localhost"})) {
      task_env_[task]["CADRE_TLS_CA"] = files.ca;
      task_env_[task]["CADRE_TLS_CERT"] = files.cert;
      task_env_[task]["CADRE_TLS_KEY"] = files.key;
    }
  }

  int run() {
    catch_stop_signals();
    for (Child& c : children_) start(c);
    while (true) {
      if (g_stop_requests > 0) return shut_down(g_stop_signal);
      pump_output(200);
      reap();
      restart_failed_evaluator();
      std::optional<int> status = options_.ps > 0 ? step_with_ps() : step_collective();
      if (status) return *status;
    }
  }

 private:
  // The evaluator only reads checkpoints: its death never touches training. It restarts
  // alone (its durable cursor says where it was), up to max_restarts times of its own;
  // after that training goes on without it and the launcher's exit status is 1.
  void restart_failed_evaluator() {
    for (Child& c : children_) {
      if (c.task.type != "evaluator" || !c.done || c.status == 0 || c.reported) continue;
      const int allowed = std::max(options_.max_restarts, 3);
      if (take_restart(c.status, evaluator_restarts_, allowed)) {
        print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                               "; restarting it alone", restart_count(c.status, evaluator_restarts_, allowed)));
        stop(c);
        start(c);
      } else {
        print_line("", str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status),
                               "); training goes on without it"));
        c.reported = true;
      }
    }
  }

  // One look at a cluster whose training tasks step together (no ps tasks): a failed
  // training task restarts all of them, which resume from the last checkpoint. Returns the
  // exit status once the cluster is done.
  std::optional<int> step_collective() {
    // Coordinator mode: a client that dies restarts alone; the workers register with the new
    // one and resume from the last checkpoint.
    for (Child& c : children_) {
      if (c.task.type != "client" || !c.done || c.status == 0) continue;
      if (!take_restart(c.status, training_restarts_, options_.max_restarts)) {
        print_line("", str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status),
                               "); stopping the cluster"));
        kill_all();
        return 1;
      }
      print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                             "; restarting it",
                             restart_count(c.status, training_restarts_, options_.max_restarts)));
      stop(c);
      start(c);
    }
    bool failed_training = false;
    int why = 0;  // a planned stop's status when every training task that ended asks for a restart
    for (const Child& c : children_) {
      if (!c.task.trains() || !c.done || c.status == 0) continue;
      if (!failed_training || stopped_for_restart(why)) why = c.status;
      failed_training = true;
    }
    if (failed_training && take_restart(why, training_restarts_, options_.max_restarts)) {
      print_line("", str_cat("cadre_launch: a training task ", ended(why),
                             "; restarting the training tasks together",
                             restart_count(why, training_restarts_, options_.max_restarts)));
      // Workers that step together stop after the same step: the others are saving or
      // exiting, and a signal now would be their second, which kills.
      if (stopped_for_restart(why)) wait_for_training_tasks();
      for (Child& c : children_) {
        if (c.task.trains()) stop(c);
      }
      for (Child& c : children_) {
        if (c.task.trains()) start(c);
      }
      return std::nullopt;
    }
    if (failed_training) {
      for (const Child& c : children_) {
        if (c.task.trains() && c.done && c.status != 0) {
          print_line("", str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status),
                                 "); stopping the cluster"));
        }
      }
      kill_all();
      return 1;
    }
    return finished_status();
  }

  // One look at a parameter-server cluster, whose workers train on their own: a worker that
  // dies is restarted alone (it rejoins) or, with no restarts left, left behind while the
  // others finish; a ps task or the chief that dies takes the variables or the checkpoints
  // with it, so the whole cluster restarts and resumes from the last checkpoint.
  std::optional<int> step_with_ps() {
    for (Child& c : children_) {
      if (c.task.type == "evaluator" || !c.done || c.status == 0 || c.reported) continue;
      // A client that dies is replaced by a new one that resumes from the last checkpoint;
      // the workers and ps tasks keep running.
      bool lone_worker = c.task.type == "worker" || c.task.type == "client";
      if (take_restart(c.status, training_restarts_, options_.max_restarts)) {
        std::string count = restart_count(c.status, training_restarts_, options_.max_restarts);
        if (lone_worker) {
          print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                                 "; restarting it", count));
          stop(c);
          start(c);
        } else {
          print_line("", str_cat("cadre_launch: ", c.task.name(), " ", ended(c.status),
                                 "; restarting the cluster, which resumes from the last "
                                 "checkpoint", count));
          for (Child& other : children_) {
            if (other.task.type != "evaluator") stop(other);
          }
          for (Child& other : children_) {
            if (other.task.type != "evaluator") start(other);
          }
        }
        return std::nullopt;
      }
      print_line("",
                 str_cat("cadre_launch: ", c.task.name(), " failed (", describe(c.status), ")",
                         c.task.type == "worker" ? "; the others go on without it"
                                                 : "; stopping the cluster"));
      c.reported = true;
      if (c.task.type != "worker") {
        kill_all();
        return 1;
      }
    }
    return finished_status();
  }

  // Once every task but the ps tasks (which serve until training ends) has exited: 0 when
  // all of them succeeded, else 1.
  std::optional<int> finished_status() {
    bool all_succeeded = true;
    for (const Child& c : children_) {
      if (c.task.type != "ps" && !c.done) return std::nullopt;
      if (c.done && c.status != 0) all_succeeded = false;
    }
    kill_all();
    return all_succeeded ? 0 : 1;
  }

  // The launcher was asked to stop: a planned stop of every task (the signal to each
  // process group), the ps tasks last, since the chief's last checkpoint reads their
  // variables; what is still running after the grace period, or at a second request, gets
  // SIGKILL. kRestartExitCode when every task stopped cleanly, else 128 + the signal.
  int shut_down(int signal) {
    print_line("", str_cat("cadre_launch: got signal ", signal, "; a planned stop of every task ",
                           "within ", options_.grace_secs, " s (again to kill them at once)"));
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(options_.grace_secs));
    auto all_done = [&](bool ps) {
      for (const Child& c : children_) {
        if ((c.task.type == "ps") == ps && !c.done && c.pid > 0) return false;
      }
      return true;
    };
    for (bool ps : {false, true}) {
      for (Child& c : children_) {
        if ((c.task.type == "ps") == ps && !c.done && c.pid > 0) ::kill(-c.pid, signal);
      }
      while (std::chrono::steady_clock::now() < deadline && g_stop_requests < 2 && !all_done(ps)) {
        pump_output(100);
        reap();
      }
    }
    bool clean = true;
    for (Child& c : children_) {
      if (!c.done && c.pid > 0) {
        ::kill(-c.pid, SIGKILL);
        ::waitpid(c.pid, &c.status, 0);
        c.done = true;
        clean = false;
      }
      drain(c);
      clean = clean && (c.status == 0 || stopped_for_restart(c.status));
    }
    if (clean) {
      print_line("", "cadre_launch: every task stopped cleanly; the same command resumes");
      return kRestartExitCode;
    }
    return 128 + signal;
  }

  // Until every training task has exited, or for the grace period.
  void wait_for_training_tasks() {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(options_.grace_secs));
    auto running = [&] {
      for (const Child& c : children_) {
        if (c.task.trains() && !c.done && c.pid > 0) return true;
      }
      return false;
    };
    while (running() && std::chrono::steady_clock::now() < deadline && g_stop_requests == 0) {
      pump_output(100);
      reap();
    }
  }

  // Whether a task that ended with `status` may be restarted: a planned stop always (up to
  // kMaxPlannedRestarts), a failure while `used` < `allowed` (counted in `used`).
  bool take_restart(int status, int& used, int allowed) {
    if (stopped_for_restart(status)) return planned_restarts_++ < kMaxPlannedRestarts;
    if (used >= allowed) return false;
    ++used;
    return true;
  }
  static std::string restart_count(int status, int used, int allowed) {
    if (stopped_for_restart(status)) return "";
    return str_cat(" (restart ", used, " of ", allowed, ")");
  }
  static std::string ended(int status) {
    if (stopped_for_restart(status)) return "stopped for a restart (a planned stop)";
    return str_cat("failed (", describe(status), ")");
  }

  static std::string describe(int status) {
    if (WIFEXITED(status)) return str_cat("exit status ", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return str_cat("killed by signal ", WTERMSIG(status));
    return "stopped";
  }

  void start(Child& c) {
    // Asked to stop while a restart stopped the tasks it replaces (each within its grace
    // period): start nothing, and shut_down ends the cluster at the next look.
    if (g_stop_requests > 0) return;
    int fds[2];
    if (::pipe(fds) != 0) throw UnavailableError("cadre_launch: pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      // A task never outlives its launcher, even one killed with SIGKILL.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher_) ::_exit(1);  // the launcher died before prctl
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
      for (const auto& [name, value] : task_env_[c.task.name()]) {
        ::setenv(name.c_str(), value.c_str(), 1);
      }
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
    c.reported = false;
    c.partial.clear();
    print_line("", str_cat("started ", c.task.name(), " pid=", pid));
  }

  void stop(Child& c) {
    if (!c.done && c.pid > 0) {
      ::kill(-c.pid, SIGTERM);  // a planned stop: a checkpoint of the step it reached
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(options_.grace_secs));
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

  // Prints the complete lines a task has written; at the end of its output (the task and
  // everything that inherited the pipe exited) closes the pipe, so that poll() does not
  // report it ready again and again.
  void drain(Child& c) {
    if (c.out < 0) return;
    char buffer[4096];
    while (true) {
      ssize_t n = ::read(c.out, buffer, sizeof buffer);
      if (n > 0) {
        c.partial.append(buffer, static_cast<size_t>(n));
        size_t newline;
        while ((newline = c.partial.find('\n')) != std::string::npos) {
          print_line("[" + c.task.name() + "] ", c.partial.substr(0, newline));
          c.partial.erase(0, newline + 1);
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      ::close(c.out);  // end of output, or an error reading it
      c.out = -1;
      if (!c.partial.empty()) print_line("[" + c.task.name() + "] ", c.partial);
      c.partial.clear();
      return;
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
      }
    }
  }

  LaunchOptions options_;
  pid_t launcher_;
  std::vector<Child> children_;
  std::map<std::string, std::string> tf_config_;
  int threads_ = 1;
  // Per task: what the security adds to its environment.
  std::map<std::string, std::map<std::string, std::string>> task_env_;
  std::string pki_dir_;  // the job's CA and certificates (kTls), removed with the cluster
  int training_restarts_ = 0;
  int evaluator_restarts_ = 0;
  int planned_restarts_ = 0;
};

}  // namespace

int run_cluster(const LaunchOptions& options) {
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
  Cluster cluster(options);
  return cluster.run();
}

}  // namespace cadre::launch
