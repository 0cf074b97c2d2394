#include "serving/http_stream.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

// The last OpenSSL error as text, clearing the queue (it is per thread).
std::string openssl_error() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no detail";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

class PlainStream final : public HttpStream {
 public:
  explicit PlainStream(int fd) : fd_(fd) {}

  Read read(std::string* buffer, StreamClock::time_point deadline) override {
    for (;;) {
      if (!wait_ready(fd_, POLLIN, deadline)) return Read::kTimedOut;
      char chunk[64 << 10];
      ssize_t got = recv(fd_, chunk, sizeof chunk, 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return Read::kClosed;
      buffer->append(chunk, static_cast<size_t>(got));
      return Read::kData;
    }
  }

  bool write_all(std::string_view data, StreamClock::time_point deadline) override {
    while (!data.empty()) {
      if (!wait_ready(fd_, POLLOUT, deadline)) return false;
      ssize_t sent = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

 private:
  const int fd_;
};

// TLS over a non-blocking socket: each OpenSSL call that wants the socket readable or
// writable waits for it with poll until the deadline, so no call blocks past it.
class TlsStream final : public HttpStream {
 public:
  TlsStream(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~TlsStream() override {
    SSL_shutdown(ssl_);  // one close_notify, not waiting for the peer's
    SSL_free(ssl_);
    ERR_clear_error();
  }

  // Runs `call` (an SSL_* function returning > 0 on success) until it succeeds, fails or
  // the deadline passes. Returns its result, or 0 on failure and -1 on timeout.
  template <typename Call>
  int retry(Call call, StreamClock::time_point deadline) {
    for (;;) {
      ERR_clear_error();
      int result = call();
      if (result > 0) return result;
      int error = SSL_get_error(ssl_, result);
      short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                     : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                     : 0;
      if (events == 0) {
        if (error == SSL_ERROR_SYSCALL && errno == EINTR) continue;
        failure_ = error == SSL_ERROR_ZERO_RETURN ? "the client closed TLS" : openssl_error();
        return 0;
      }
      if (!wait_ready(fd_, events, deadline)) return -1;
    }
  }

  Read read(std::string* buffer, StreamClock::time_point deadline) override {
    char chunk[16 << 10];  // a TLS record holds at most 16 KiB
    int got = retry([&] { return SSL_read(ssl_, chunk, sizeof chunk); }, deadline);
    if (got < 0) return Read::kTimedOut;
    if (got == 0) return Read::kClosed;
    buffer->append(chunk, static_cast<size_t>(got));
    return Read::kData;
  }

  bool write_all(std::string_view data, StreamClock::time_point deadline) override {
    while (!data.empty()) {
      int chunk = static_cast<int>(std::min<size_t>(data.size(), 1 << 20));
      int sent = retry([&] { return SSL_write(ssl_, data.data(), chunk); }, deadline);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  const std::string& failure() const { return failure_; }

 private:
  SSL* const ssl_;
  const int fd_;
  std::string failure_;
};

}  // namespace

bool wait_ready(int fd, short events, StreamClock::time_point deadline) {
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - StreamClock::now());
    if (left.count() <= 0) return false;
    pollfd entry{fd, events, 0};
    int ready = poll(&entry, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

std::unique_ptr<HttpStream> plain_stream(int fd) { return std::make_unique<PlainStream>(fd); }

TlsContext::TlsContext(const std::string& cert_file, const std::string& key_file) {
  context_ = SSL_CTX_new(TLS_server_method());
  if (!context_) throw InternalError(str_cat("TLS: cannot make a context: ", openssl_error()));
  SSL_CTX_set_min_proto_version(context_, TLS1_2_VERSION);
  SSL_CTX_set_mode(context_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  auto fail = [&](const std::string& what) {
    std::string detail = openssl_error();
    SSL_CTX_free(context_);
    context_ = nullptr;
    return InvalidArgumentError(str_cat("TLS: ", what, " (", detail, ")"));
  };
  if (SSL_CTX_use_certificate_chain_file(context_, cert_file.c_str()) != 1) {
    throw fail(str_cat("cannot read a PEM certificate from ", cert_file));
  }
  if (SSL_CTX_use_PrivateKey_file(context_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL checks the pair as it loads the key.
    bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    throw fail(mismatch ? str_cat("the key in ", key_file, " is not the key of the certificate in ",
                                  cert_file)
                        : str_cat("cannot read a PEM private key from ", key_file));
  }
  if (SSL_CTX_check_private_key(context_) != 1) {
    throw fail(
        str_cat("the key in ", key_file, " is not the key of the certificate in ", cert_file));
  }
}

TlsContext::~TlsContext() { SSL_CTX_free(context_); }

std::unique_ptr<HttpStream> TlsContext::accept(int fd, StreamClock::time_point deadline,
                                               std::string* why) const {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  // A TLS connection starts with a handshake record (0x16); a plain HTTP request with a
  // method's letters. Those get an answer they can read instead of a broken connection.
  unsigned char first = 0;
  for (;;) {
    if (!wait_ready(fd, POLLIN, deadline)) {
      *why = "no TLS handshake arrived in time";
      return nullptr;
    }
    ssize_t got = recv(fd, &first, 1, MSG_PEEK);
    if (got == 1) break;
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    *why = "the client closed the connection before a TLS handshake";
    return nullptr;
  }
  if (std::isupper(first)) {
    std::string body =
        "{\"error\":\"this port speaks TLS (https://); the request was plain HTTP\"}";
    plain_stream(fd)->write_all(
        str_cat("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                "Content-Length: ",
                body.size(), "\r\nConnection: close\r\n\r\n", body),
        deadline);
    *why = "a plain HTTP request on the TLS port";
    return nullptr;
  }
  SSL* ssl = SSL_new(context_);
  if (!ssl || SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    *why = str_cat("cannot start TLS: ", openssl_error());
    return nullptr;
  }
  auto stream = std::make_unique<TlsStream>(ssl, fd);
  int result = stream->retry([&] { return SSL_accept(ssl); }, deadline);
  if (result <= 0) {
    *why = result < 0 ? "the TLS handshake did not finish in time"
                      : str_cat("TLS handshake failed: ", stream->failure());
    return nullptr;
  }
  return stream;
}

}  // namespace cadre::serving_internal
