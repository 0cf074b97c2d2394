// An HTTP/1.1 request parser for the REST API: pure (no sockets), bounded, fuzzed
// (tests/fuzz/rest_request_fuzz.cc). Bodies need a Content-Length; chunked transfer
// encoding is refused (501), as are heads past their bounds (431) and bodies past theirs
// (413), before the body is read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cadre::serving_internal {

struct HttpLimits {
  size_t max_head_bytes = 16 << 10;  // request line and headers
  size_t max_headers = 64;
  size_t max_body_bytes = 64 << 20;
};

struct HttpRequest {
  std::string method;
  std::string target;                                        // the path and query, as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  bool keep_alive = true;

  // The first header of that (lower-case) name, or nullptr.
  const std::string* header(std::string_view name) const;
};

struct HttpParse {
  enum class State { kIncomplete, kComplete, kError };
  State state = State::kIncomplete;
  // kIncomplete: whether the head is complete and asks for "100 Continue".
  bool expects_continue = false;
  // kComplete: the request, and the bytes of `buffer` it took.
  HttpRequest request;
  size_t consumed = 0;
  // kError: the status to answer with and why.
  int status = 0;
  std::string error;
};

// Parses the request at the start of `buffer` (the bytes received so far on a connection).
HttpParse parse_http_request(std::string_view buffer, const HttpLimits& limits);

}  // namespace cadre::serving_internal
