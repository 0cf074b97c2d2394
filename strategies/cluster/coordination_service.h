// The coordination service of a training cluster, over gRPC: hosted by the chief (worker 0
// without a chief), used by every training task through a CoordinationClient.
//
// - Registration: every task registers at start-up and waits until all have; the service
//   logs every few seconds who has and has not arrived, and a registration that times out
//   fails with a message naming the tasks that never came.
// - Heartbeats: each client sends one every heartbeat_interval; a task silent for
//   heartbeat_timeout is declared dead, and from then on every call of every task fails
//   with AbortedError naming it, so the survivors stop instead of hanging in a collective.
// - A key-value store for rendezvous (the client is the cluster's Store), named barriers,
//   and a shutdown barrier (a barrier named "shutdown").
// - Planned stops: once every task has passed the barrier kPlannedStopBarrier (they stopped
//   together and will be restarted), silence is no failure, and a restarted task's
//   registration begins a new round instead of failing the cluster. This matters to a
//   service that outlives the tasks (a coordinator-mode client's).
//
// Errors reach callers as Cadre's typed errors: DeadlineExceededError (timeouts, naming
// the missing tasks), AbortedError (a dead task), UnavailableError (no service at the
// address, or a port that cannot be bound, naming it).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/multi_worker_options.h"
#include "strategies/cluster/store.h"

namespace cadre {

// The barrier the training tasks pass when they stop for a planned stop (after the
// checkpoint of the step they stopped at is durable).
inline constexpr char kPlannedStopBarrier[] = "planned_stop";

class CoordinationService {
 public:
  // Serves at `address` ("host:port"; port 0 picks a free one) for the training tasks of
  // `tasks`. Throws UnavailableError naming the address when it cannot be bound.
  // Accepts only callers holding `security`'s job token (FailedPreconditionError when it has
  // none and is not insecure), with mutual TLS when it names the files.
  static std::unique_ptr<CoordinationService> start(const std::string& address,
                                                    std::vector<TaskId> tasks,
                                                    CoordinationOptions options,
                                                    const ClusterSecurity& security);
  virtual ~CoordinationService() = default;
  // The address it listens on, with the port chosen.
  virtual std::string address() const = 0;
  // For a client that hosts the service for its workers (coordinator mode): the failure
  // declared (a dead task), empty while healthy; whether every task reached barrier `name`;
  virtual std::string failure() const = 0;
  virtual bool barrier_complete(const std::string& name) const = 0;
  // Whether every task has registered (in this round).
  virtual bool formed() const = 0;
  // Asks every task for a planned stop, at its next heartbeat; from then on a task that
  // registers anew is held until the service stops (the host is stopping too, and its
  // successor serves the restarted tasks). Whether they all stopped: stopped_as_planned().
  virtual void request_planned_stop() = 0;
  // Whether every task passed kPlannedStopBarrier in this round.
  virtual bool stopped_as_planned() const = 0;
  // A new round on the same address: registrations, heartbeats, keys, barriers and the
  // failure are forgotten, every task registers again, and the heartbeats of tasks of the
  // previous round fail with ABORTED, so that they stop.
  virtual void begin_round() = 0;
  // After a failure, waits up to `seconds` until every task but `host` (the one serving) has
  // been told of it, so that a task asking why its collective broke hears the answer before
  // the service goes. Returns at once without a failure.
  virtual void linger_after_failure(const std::string& host, double seconds) = 0;
  // Stops serving; waiting calls fail with UnavailableError.
  virtual void stop() = 0;
};

// Thread-safe; every call takes a timeout.
class CoordinationClient : public Store {
 public:
  static std::unique_ptr<CoordinationClient> connect(const std::string& address, TaskId task,
                                                     CoordinationOptions options,
                                                     const ClusterSecurity& security);
  virtual ~CoordinationClient() = default;
  // Registers this task and waits for every other one, then starts heartbeats.
  virtual void register_task(double timeout_seconds) = 0;
  virtual void barrier(const std::string& name, double timeout_seconds) = 0;
  // Stops the heartbeats (as a process that dies would).
  virtual void stop_heartbeats() = 0;
  // Whether the service asked for a planned stop (CoordinationService::request_planned_stop),
  // as the heartbeats heard it.
  virtual bool planned_stop_requested() const = 0;
  // The failure the service reported for the cluster (a dead task, or a task's own error),
  // empty while healthy.
  virtual std::string failure() const = 0;
  // Asks the service now (one heartbeat within `timeout_seconds`) and returns failure():
  // what a task whose collective just broke learns of why, when a peer reported its error.
  virtual std::string failure_now(double timeout_seconds) = 0;
  // Tells the service that this task failed with `message`, so that the cluster fails with
  // it. Best effort, within `timeout_seconds`: a failure to report is logged, not thrown.
  virtual void report_error(const std::string& message, double timeout_seconds) = 0;
  // An elastic group's newest generation of members, as registration and the heartbeats
  // heard it (strategies/cluster/membership.h); 0 for a group that is not elastic.
  virtual int64_t view_generation() const { return 0; }
  // Tells the service now, and with every heartbeat after, that this task's collective of
  // `generation` broke (strategies/cluster/membership.h, Membership::note_broken).
  virtual void report_broken(int64_t generation) {}
};

}  // namespace cadre
