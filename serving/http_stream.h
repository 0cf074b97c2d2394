// The bytes of one REST connection, plain or TLS (OpenSSL), every call bounded by a
// deadline so that the HTTP server's protections against slow clients hold for both: a
// TLS client must finish its handshake within the request timeout, as a plain one must
// send its request.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, kept out of the header

namespace cadre::serving_internal {

using StreamClock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` (poll's) or `deadline` passes (false).
bool wait_ready(int fd, short events, StreamClock::time_point deadline);

class HttpStream {
 public:
  enum class Read { kData, kClosed, kTimedOut };
  virtual ~HttpStream() = default;
  // Appends what arrives (at least one byte) to `buffer`, waiting until `deadline`.
  // kClosed: the peer closed the connection or it failed.
  virtual Read read(std::string* buffer, StreamClock::time_point deadline) = 0;
  // Sends all of `data` by `deadline`; false when it could not.
  virtual bool write_all(std::string_view data, StreamClock::time_point deadline) = 0;
};

// The connection's bytes as they are (the socket stays the caller's to close).
std::unique_ptr<HttpStream> plain_stream(int fd);

// The server's certificate chain and key (PEM files), shared by its connections.
// Thread-safe.
class TlsContext {
 public:
  // Throws InvalidArgumentError naming the file that cannot be read or holds no PEM
  // certificate or key, or saying that the key is not the certificate's.
  TlsContext(const std::string& cert_file, const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Completes a TLS handshake on the accepted socket `fd` (made non-blocking) by
  // `deadline`. Null when the client does not: `*why` says why, and a client that spoke
  // plain HTTP has been answered 400 saying that the port speaks TLS.
  std::unique_ptr<HttpStream> accept(int fd, StreamClock::time_point deadline,
                                     std::string* why) const;

 private:
  ssl_ctx_st* context_ = nullptr;
};

}  // namespace cadre::serving_internal
