#include "serving/http_server.h"

#include <glog/logging.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/rest_json.h"

namespace cadre::serving_internal {

namespace {

using Clock = std::chrono::steady_clock;

int listen_on(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string where = str_cat(host, ":", port);
  int error = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (error != 0) {
    throw UnavailableError(
        str_cat("REST API: cannot listen on ", where, " (", gai_strerror(error), ")"));
  }
  std::string why = "no address";
  for (addrinfo* address = found; address; address = address->ai_next) {
    int fd = socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, address->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, address->ai_addr, address->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      sockaddr_storage local{};
      socklen_t length = sizeof local;
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
      *bound_port =
          ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
      freeaddrinfo(found);
      return fd;
    }
    why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  throw UnavailableError(str_cat("REST API: cannot listen on ", where, " (", why, ")"));
}

std::string response_text(const HttpResponse& response, bool keep_alive) {
  return str_cat("HTTP/1.1 ", response.status, " ", http_reason(response.status),
                 "\r\nContent-Type: ", response.content_type,
                 "\r\nContent-Length: ", response.body.size(),
                 keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n", response.body);
}

HttpResponse error_response(int status, const std::string& message) {
  return HttpResponse{status, str_cat("{\"error\":", json_quote(message), "}")};
}

}  // namespace

const char* http_reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return status >= 500 ? "Internal Server Error" : "Error";
  }
}

HttpServer::HttpServer(const std::string& host, int port, const HttpLimits& limits,
                       int max_connections, double request_timeout_secs, Handler handler,
                       std::shared_ptr<const TlsContext> tls)
    : limits_(limits),
      max_connections_(max_connections),
      request_timeout_secs_(request_timeout_secs),
      handler_(std::move(handler)),
      tls_(std::move(tls)) {
  listen_fd_ = listen_on(host, port, &port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  close(listen_fd_);
  std::list<std::unique_ptr<Connection>> connections;
  {
    MutexLock lock(mutex_);
    // Ends reads in progress; a request being handled still gets its response attempt.
    for (const auto& connection : connections_) {
      if (connection->fd >= 0) shutdown(connection->fd, SHUT_RD);
    }
    connections.swap(connections_);
  }
  for (const auto& connection : connections) connection->thread.join();
}

void HttpServer::reap_finished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::accept_loop() {
  while (!stopping_) {
    pollfd entry{listen_fd_, POLLIN, 0};
    if (poll(&entry, 1, 100) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    MutexLock lock(mutex_);
    reap_finished();
    if (static_cast<int>(connections_.size()) >= max_connections_) {
      // A TLS client could not read a plain answer: it only sees the connection close.
      if (!tls_) {
        auto deadline = Clock::now() + std::chrono::milliseconds(100);
        plain_stream(fd)->write_all(
            response_text(error_response(503, "too many connections"), false), deadline);
      }
      close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    Connection* raw = connection.get();
    connections_.push_back(std::move(connection));
    raw->thread = std::thread([this, raw] { serve(raw); });
  }
}

void HttpServer::serve(Connection* connection) {
  int fd = connection->fd;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(request_timeout_secs_ * 1000));
  std::unique_ptr<HttpStream> stream;
  if (tls_) {
    std::string why;
    stream = tls_->accept(fd, Clock::now() + timeout, &why);
    if (!stream) VLOG(1) << "REST: a TLS connection ended before a request: " << why;
  } else {
    stream = plain_stream(fd);
  }
  std::string buffer;
  bool keep_alive = stream != nullptr;
  bool continued = false;
  while (keep_alive && !stopping_) {
    auto deadline = Clock::now() + (buffer.empty() ? std::chrono::seconds(kIdleSeconds) : timeout);
    HttpParse parse = parse_http_request(buffer, limits_);
    while (parse.state == HttpParse::State::kIncomplete) {
      if (parse.expects_continue && !continued) {
        continued = stream->write_all("HTTP/1.1 100 Continue\r\n\r\n", Clock::now() + timeout);
      }
      bool first = buffer.empty();
      HttpStream::Read read = stream->read(&buffer, deadline);
      if (read == HttpStream::Read::kTimedOut) {
        if (!buffer.empty()) {
          stream->write_all(
              response_text(error_response(408, "the request did not arrive in time"), false),
              Clock::now() + timeout);
        }
        parse.state = HttpParse::State::kError;
        break;
      }
      if (read == HttpStream::Read::kClosed) break;
      if (first) deadline = Clock::now() + timeout;
      parse = parse_http_request(buffer, limits_);
    }
    if (parse.state == HttpParse::State::kError && parse.status != 0) {
      stream->write_all(response_text(error_response(parse.status, parse.error), false),
                        Clock::now() + timeout);
    }
    if (parse.state != HttpParse::State::kComplete) break;
    buffer.erase(0, parse.consumed);
    continued = false;
    keep_alive = parse.request.keep_alive && !stopping_;
    HttpResponse response = handler_(parse.request);
    if (!stream->write_all(response_text(response, keep_alive), Clock::now() + timeout)) break;
  }
  stream.reset();  // TLS says goodbye on the socket before it closes
  // Under the mutex, so that stop() never shuts down a number a new file took.
  MutexLock lock(mutex_);
  close(fd);
  connection->fd = -1;
  connection->done = true;
}

}  // namespace cadre::serving_internal
