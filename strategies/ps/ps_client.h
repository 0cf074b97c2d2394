// One parameter-server task as a worker sees it: its RPCs with deadlines, message-size
// checks, and errors that name the task and the variables. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_security.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/ps/ps.grpc.pb.h"

namespace cadre::ps {

struct ClientOptions {
  // Requests larger than this fail before they are sent (InternalError naming what they
  // carry: the callers cut theirs to fit, message_budget.h).
  int64_t max_message_bytes = int64_t{256} << 20;
  // For calls that do not wait for the chief.
  double rpc_timeout_seconds = 60;
  // The job's token and TLS files.
  ClusterSecurity security;
};

class PsClient {
 public:
  PsClient(int index, std::string address, ClientOptions options = {});
  // "ps:1 (127.0.0.1:2223)"
  const std::string& name() const { return name_; }

  // Returns once the task answers; logs every 10 s while waiting. Throws
  // DeadlineExceededError naming the task and its address after `timeout_seconds`.
  void wait_until_ready(double timeout_seconds);

  // The RPCs of ps.proto. Errors are Cadre's, with the ps's code: UnavailableError when the
  // task is gone, InvalidArgumentError for a bad request, DeadlineExceededError, ... each
  // naming the task. Calls that wait for the chief (create without a value, a worker's first
  // push) take the request's timeout_seconds plus a margin as their deadline.
  CreateResponse create(const CreateRequest& request);
  PullResponse pull(const PullRequest& request);
  PushResponse push(const PushRequest& request);
  // Sets the global step (the chief), or waits until it is set and returns it.
  int64_t global_step(std::optional<int64_t> set, double timeout_seconds);
  ReadResponse read(const ReadRequest& request);
  // The coordinator's ledger (ps 0 only): a new generation, or units' steps applied.
  UnitsResponse units(const UnitsRequest& request);
  // The workers' input positions ps 0 keeps (input_positions.h).
  InputPositionsResponse input_positions(const InputPositionsRequest& request);
  // A sharded checkpoint's part: the task snapshots and starts writing it (Save), then
  // SaveStatus waits for it (the request's timeout plus a margin).
  SaveResponse save(const SaveRequest& request);
  SaveStatusResponse save_status(const SaveStatusRequest& request);
  // The chief's planned stop (ps.proto's PlannedStopRequest).
  void planned_stop();
  // Whether a pull's or push's response since the last call said planned_stop; clears it.
  bool take_planned_stop() { return planned_stop_heard_.exchange(false); }

  // Bytes of requests sent and responses received so far; of them, the gradients pushed
  // (push requests) and the values pulled (pull responses).
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  int64_t bytes_pushed() const { return bytes_pushed_; }
  int64_t bytes_pulled() const { return bytes_pulled_; }

 private:
  template <typename Request, typename Response, typename Method>
  Response call(const std::string& what, const Request& request, Method method,
                double timeout_seconds);

  std::string address_, name_;
  ClientOptions options_;
  JobToken token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServerService::Stub> stub_;
  std::atomic<int64_t> bytes_sent_{0}, bytes_received_{0}, bytes_pushed_{0}, bytes_pulled_{0};
  std::atomic<bool> planned_stop_heard_{false};
};

}  // namespace cadre::ps
