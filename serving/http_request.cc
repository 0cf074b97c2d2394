#include "serving/http_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace cadre::serving_internal {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

HttpParse failure(int status, std::string error) {
  HttpParse parse;
  parse.state = HttpParse::State::kError;
  parse.status = status;
  parse.error = std::move(error);
  return parse;
}

bool is_token(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// The request line: METHOD SP TARGET SP HTTP/1.x.
bool parse_request_line(std::string_view line, HttpRequest* request, bool* http10) {
  size_t first = line.find(' ');
  size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) return false;
  std::string_view method = line.substr(0, first);
  std::string_view target = line.substr(first + 1, last - first - 1);
  std::string_view version = line.substr(last + 1);
  if (!is_token(method) || target.empty() || target.front() != '/') return false;
  if (target.find_first_of(" \t") != std::string_view::npos) return false;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  request->method = std::string(method);
  request->target = std::string(target);
  *http10 = version == "HTTP/1.0";
  return true;
}

// The headers between the request line and the blank line; false on a malformed one.
bool parse_headers(std::string_view head, size_t max_headers, HttpRequest* request) {
  while (!head.empty()) {
    size_t end = head.find("\r\n");
    std::string_view line = head.substr(0, end);
    head = end == std::string_view::npos ? std::string_view() : head.substr(end + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return false;
    if (request->headers.size() == max_headers) return false;
    request->headers.emplace_back(lower(line.substr(0, colon)),
                                  std::string(trim(line.substr(colon + 1))));
  }
  return true;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

HttpParse parse_http_request(std::string_view buffer, const HttpLimits& limits) {
  size_t head_end = buffer.find("\r\n\r\n");
  size_t head_bytes = head_end == std::string_view::npos ? buffer.size() : head_end + 4;
  if (head_bytes > limits.max_head_bytes) {
    return failure(431, "the request line and headers exceed " +
                            std::to_string(limits.max_head_bytes) + " bytes");
  }
  if (head_end == std::string_view::npos) return HttpParse{};
  std::string_view head = buffer.substr(0, head_end);
  size_t line_end = head.find("\r\n");
  HttpRequest request;
  bool http10 = false;
  if (!parse_request_line(head.substr(0, line_end), &request, &http10)) {
    return failure(400, "malformed request line");
  }
  std::string_view fields =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  if (!parse_headers(fields, limits.max_headers, &request)) {
    return failure(request.headers.size() == limits.max_headers ? 431 : 400,
                   request.headers.size() == limits.max_headers
                       ? "more than " + std::to_string(limits.max_headers) + " headers"
                       : "malformed header line");
  }
  if (request.header("transfer-encoding")) {
    return failure(501, "chunked request bodies are not supported; send a Content-Length");
  }
  size_t length = 0;
  if (const std::string* text = request.header("content-length")) {
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), length);
    if (error != std::errc() || end != text->data() + text->size() || text->empty()) {
      return failure(400, "malformed Content-Length '" + *text + "'");
    }
    if (length > limits.max_body_bytes) {
      return failure(413, "the request body of " + *text + " bytes exceeds the limit of " +
                              std::to_string(limits.max_body_bytes) + " bytes");
    }
  }
  const std::string* connection = request.header("connection");
  std::string connection_value = connection ? lower(*connection) : "";
  request.keep_alive = http10 ? connection_value == "keep-alive" : connection_value != "close";
  size_t body_start = head_end + 4;
  if (buffer.size() - body_start < length) {
    HttpParse incomplete;
    const std::string* expect = request.header("expect");
    incomplete.expects_continue = expect && lower(*expect) == "100-continue";
    return incomplete;
  }
  HttpParse parse;
  parse.state = HttpParse::State::kComplete;
  request.body = std::string(buffer.substr(body_start, length));
  parse.request = std::move(request);
  parse.consumed = body_start + length;
  return parse;
}

}  // namespace cadre::serving_internal
