// The parameter-server service that a ps task runs (TF_CONFIG type "ps"), over gRPC
// (strategies/ps/ps.proto). It holds variables (whole, or row slices of partitioned ones)
// and their optimizer slots, and applies the gradients workers push with the optimizer
// they describe; one ps also holds the global step.
//
// - Variables are created by the chief, with the value it restored or initialised; other
//   workers' creations wait until the chief has given it (TensorFlow's workers wait for the
//   chief to initialise the model). A chief that comes again (restarted) replaces values.
// - Updates of one variable are atomic with respect to each other and to reads; different
//   variables update in parallel.
// - A worker's first push for a variable waits until the chief has sent that variable's
//   optimizer state (restored slots or fresh ones), so that every update starts from it.
//
// Thread-safe. Errors reach clients as gRPC statuses carrying Cadre's error codes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include "cadre/base/errors.h"

namespace cadre::ps {

struct ServerOptions {
  // The largest message accepted or sent; larger ones fail with RESOURCE_EXHAUSTED.
  int64_t max_message_bytes = int64_t{256} << 20;
  // How often the server logs what it holds and how busy it is.
  double log_every_seconds = 30;
  std::string task = "ps:0";  // for messages
};

class ParameterServer {
 public:
  // Serves at `address` ("host:port"; port 0 picks one). Throws UnavailableError naming the
  // address when it cannot be bound.
  static std::unique_ptr<ParameterServer> start(const std::string& address,
                                                ServerOptions options = {});
  virtual ~ParameterServer() = default;
  virtual std::string address() const = 0;  // with the port chosen
  // Blocks until stop().
  virtual void wait() = 0;
  virtual void stop() = 0;
};

}  // namespace cadre::ps
