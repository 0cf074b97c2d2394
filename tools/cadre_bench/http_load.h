// A closed-loop HTTP/1.1 load generator: `concurrency` keep-alive connections, each sending
// the same request again as soon as the previous response has arrived, all driven by one
// thread (epoll), so that the client costs the machine as little as a client can: on a
// 2-core host the server under test keeps at least one core to itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cadre::bench {

struct HttpLoadOptions {
  std::string host = "127.0.0.1";  // a numeric IPv4 address
  int port = 0;
  std::string request;  // the whole request, head and body, sent as is
  int concurrency = 1;
  double warmup_secs = 1;  // responses in this first interval are not counted
  double seconds = 5;      // the measured interval after it
};

struct HttpLoadResult {
  int64_t responses = 0;             // status 200 within the measured interval
  int64_t failures = 0;              // other statuses, closed or refused connections, within it
  double seconds = 0;                // the measured interval as it was
  double client_cpu_secs = 0;        // this process's CPU time during it
  std::vector<double> latencies_ms;  // of each counted response, request sent to read
  std::string first_failure;         // the first failure's status line or reason
};

// Runs the load. Throws UnavailableError when no connection can be opened at the start.
HttpLoadResult run_http_load(const HttpLoadOptions& options);

}  // namespace cadre::bench
