#include "tools/cadre_bench/http_load.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "tools/cadre_bench/timing.h"

namespace cadre::bench {
namespace {

double cpu_secs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

// A connected, non-blocking socket without Nagle's delay, or -1 with errno set.
int connect_to(const HttpLoadOptions& options) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) {
    throw InvalidArgumentError(str_cat("--host '", options.host, "' is not an IPv4 address"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// How much of `in` one whole response takes (0: not all there yet; -1: not HTTP or no
// Content-Length), and its status.
int64_t response_length(const std::string& in, int* status) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  if (in.compare(0, 9, "HTTP/1.1 ") != 0) return -1;
  *status = std::atoi(in.c_str() + 9);
  constexpr std::string_view kLength = "\r\ncontent-length:";
  for (size_t i = 0; i + kLength.size() <= head_end; ++i) {
    if (strncasecmp(in.data() + i, kLength.data(), kLength.size()) != 0) continue;
    int64_t body = std::atoll(in.c_str() + i + kLength.size());
    int64_t whole = static_cast<int64_t>(head_end + 4) + body;
    return static_cast<int64_t>(in.size()) >= whole ? whole : 0;
  }
  return -1;
}

class LoadLoop {
 public:
  explicit LoadLoop(const HttpLoadOptions& options) : options_(options), epoll_(epoll_create1(0)) {
    connections_.resize(static_cast<size_t>(options.concurrency));
  }
  ~LoadLoop() {
    for (Connection& c : connections_) {
      if (c.fd >= 0) close(c.fd);
    }
    close(epoll_);
  }

  HttpLoadResult run() {
    for (Connection& c : connections_) {
      if (!open(c)) {
        throw UnavailableError(str_cat("cannot connect to ", options_.host, ":", options_.port,
                                       ": ", std::strerror(errno)));
      }
    }
    auto start = Clock::now();
    measure_from_ =
        start + std::chrono::microseconds(static_cast<int64_t>(options_.warmup_secs * 1e6));
    auto end =
        measure_from_ + std::chrono::microseconds(static_cast<int64_t>(options_.seconds * 1e6));
    bool measuring = false;
    double cpu_start = 0;
    std::vector<epoll_event> events(connections_.size());
    for (auto now = start; now < end; now = Clock::now()) {
      if (!measuring && now >= measure_from_) {
        measuring = true;
        cpu_start = cpu_secs();
      }
      for (Connection& c : connections_) {
        if (c.fd < 0) open(c);  // reconnects what a failure closed
      }
      int ready = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 10);
      for (int i = 0; i < ready; ++i) on_ready(connections_[events[i].data.u32], events[i].events);
    }
    result_.seconds = ms_between(measure_from_, Clock::now()) / 1e3;
    result_.client_cpu_secs = cpu_secs() - cpu_start;
    return std::move(result_);
  }

 private:
  struct Connection {
    int fd = -1;
    size_t sent = 0;
    std::string in;
    Clock::time_point started;
  };

  bool open(Connection& c) {
    c.fd = connect_to(options_);
    if (c.fd < 0) return false;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u32 = static_cast<uint32_t>(&c - connections_.data());
    epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &event);
    begin(c);
    return true;
  }

  void begin(Connection& c) {
    c.sent = 0;
    c.in.clear();
    c.started = Clock::now();
    write_more(c);
  }

  void write_more(Connection& c) {
    const std::string& request = options_.request;
    while (c.sent < request.size()) {
      ssize_t n = send(c.fd, request.data() + c.sent, request.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) return fail(c, str_cat("send: ", std::strerror(errno)));
      c.sent += static_cast<size_t>(n);
    }
    epoll_event event{};
    event.events = c.sent < request.size() ? EPOLLIN | EPOLLOUT : EPOLLIN;
    event.data.u32 = static_cast<uint32_t>(&c - connections_.data());
    epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &event);
  }

  void on_ready(Connection& c, uint32_t events) {
    if (c.fd < 0) return;
    if (events & EPOLLOUT) write_more(c);
    if (c.fd < 0 || !(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
    char chunk[64 << 10];
    for (;;) {
      ssize_t n = recv(c.fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0)
        return fail(c, n == 0 ? "the server closed the connection" : std::strerror(errno));
      c.in.append(chunk, static_cast<size_t>(n));
    }
    int status = 0;
    int64_t length = response_length(c.in, &status);
    if (length == 0) return;
    if (length < 0) return fail(c, "a response that is not HTTP/1.1 with a Content-Length");
    auto done = Clock::now();
    if (status != 200) return fail(c, c.in.substr(0, c.in.find("\r\n")));
    if (done >= measure_from_ && c.started >= measure_from_) {
      ++result_.responses;
      result_.latencies_ms.push_back(ms_between(c.started, done));
    }
    begin(c);
  }

  // Counts a failure (when measuring), closes the connection and opens a fresh one.
  void fail(Connection& c, const std::string& why) {
    if (Clock::now() >= measure_from_) {
      if (result_.failures++ == 0) result_.first_failure = why;
    }
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    open(c);
  }

  const HttpLoadOptions& options_;
  int epoll_;
  std::vector<Connection> connections_;
  Clock::time_point measure_from_;
  HttpLoadResult result_;
};

}  // namespace

HttpLoadResult run_http_load(const HttpLoadOptions& options) {
  if (options.concurrency < 1 || options.seconds <= 0 || options.warmup_secs < 0) {
    throw InvalidArgumentError("the load needs a concurrency of at least 1 and a duration");
  }
  return LoadLoop(options).run();
}

}  // namespace cadre::bench
