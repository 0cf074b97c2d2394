// A small HTTP/1.1 server for the REST API: a thread per connection (at most
// max_connections; more are answered 503 and closed), persistent connections, and
// deadlines against slow clients: a request must arrive whole within request_timeout once
// its first byte has, an idle connection is closed after kIdleSeconds, and a response
// must be taken within request_timeout. With a TlsContext every connection is TLS, its
// handshake due within request_timeout of the connection.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "cadre/base/mutex.h"
#include "serving/http_request.h"
#include "serving/http_stream.h"

namespace cadre::serving_internal {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// An HTTP status line's reason phrase ("Too Many Requests").
const char* http_reason(int status);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  static constexpr int kIdleSeconds = 30;

  // Listens on host:port (port 0: a free one) and serves requests with `handler`, which
  // must not throw; over TLS when `tls` is given. Throws UnavailableError naming the
  // address when it cannot listen.
  HttpServer(const std::string& host, int port, const HttpLimits& limits, int max_connections,
             double request_timeout_secs, Handler handler,
             std::shared_ptr<const TlsContext> tls = nullptr);
  ~HttpServer();  // stop()

  int port() const { return port_; }
  // Stops accepting, ends every connection (a request being handled finishes first) and
  // joins the threads. Idempotent.
  void stop();

 private:
  struct Connection {
    int fd = -1;
    std::atomic<bool> done{false};
    std::thread thread;
  };

  void accept_loop();
  void serve(Connection* connection);
  void reap_finished() CADRE_REQUIRES(mutex_);

  const HttpLimits limits_;
  const int max_connections_;
  const double request_timeout_secs_;
  const Handler handler_;
  const std::shared_ptr<const TlsContext> tls_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  Mutex mutex_;
  std::list<std::unique_ptr<Connection>> connections_ CADRE_GUARDED_BY(mutex_);
  std::thread acceptor_;
};

}  // namespace cadre::serving_internal
