// The parameter-server service that a ps task runs (TF_CONFIG type "ps"): a Shard
// (shard.h), which holds the variables and applies the updates, served over gRPC
// (strategies/ps/ps.proto) with a limit on message sizes and a periodic log of what it
// holds and how busy it is.
//
// Thread-safe. Errors reach clients as gRPC statuses carrying Cadre's error codes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cadre/strategies/cluster_security.h"
#include "strategies/ps/part_snapshot.h"

namespace cadre::ps {

struct ServerOptions {
  // The largest message accepted (larger ones fail with RESOURCE_EXHAUSTED) or sent (an
  // answer that would be larger fails with INTERNAL): workers cut theirs to fit both.
  int64_t max_message_bytes = int64_t{256} << 20;
  // How often the server logs what it holds and how busy it is.
  double log_every_seconds = 30;
  std::string task = "ps:0";  // for messages
  // Who may call (the job's secret, TLS) and where to listen.
  ClusterSecurity security;
  // Writes this task's part of a sharded checkpoint where the chief's Save asks (a caller
  // holding the job's secret may name any directory the task can write to). Unset: Save
  // fails with FAILED_PRECONDITION.
  PartWriter write_part;
  // Reads this task's rows when the chief's Create or Push names a checkpoint instead of
  // carrying the values (ps.proto's RestoreRows). Unset (a task without a model_dir): those
  // requests fail with FAILED_PRECONDITION, and the chief sends values instead.
  RowRestorer read_rows;
};

class ParameterServer {
 public:
  // Serves at `address` ("host:port"; port 0 picks one; on the security's bind host when it
  // names one) callers holding the job's token. Throws UnavailableError naming the address
  // when it cannot be bound, FailedPreconditionError when the security has no secret.
  static std::unique_ptr<ParameterServer> start(const std::string& address,
                                                ServerOptions options = {});
  virtual ~ParameterServer() = default;
  virtual std::string address() const = 0;  // with the port chosen
  // Blocks until stop() (wait_for: for at most `seconds`; true once stopped).
  virtual void wait() = 0;
  virtual bool wait_for(double seconds) = 0;
  // Seconds since a task's last call (since the start before the first).
  virtual double seconds_since_last_call() const = 0;
  // This task's own planned stop: from now on every pull's and push's response tells the
  // training tasks to stop after their step (the chief with a checkpoint, read from here).
  virtual void begin_planned_stop() = 0;
  // Stops serving; calls waiting in the shard fail with UnavailableError.
  virtual void stop() = 0;
};

}  // namespace cadre::ps
