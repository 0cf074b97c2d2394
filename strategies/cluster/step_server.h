// What a worker serves in coordinator mode (docs/DEPLOY.md): the StepService of
// step_service.proto, through which the client hands it units of training steps, and the
// side its training loop sees: the unit to take a step of, and where to say how ps 0
// counted the step. The RunUnit call of a unit returns once ps 0 counts the unit complete.
//
// Thread-safe. Every call must carry the job's token (strategies/cluster/grpc_security.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_security.h"
#include "strategies/ps/work_unit.h"

namespace cadre {

// The trailing metadata key of a RunUnit that failed because the worker's training did.
inline constexpr char kTrainingFailedKey[] = "x-cadre-training-failed";

struct StepServerOptions {
  std::string task = "worker:0";  // for messages
  ClusterSecurity security;
};

class StepServer {
 public:
  // Serves at `address` ("host:port"; port 0 picks one). Throws UnavailableError naming the
  // address when it cannot be bound, FailedPreconditionError when the security has no secret.
  static std::unique_ptr<StepServer> start(const std::string& address, StepServerOptions options);
  virtual ~StepServer() = default;
  virtual std::string address() const = 0;  // with the port chosen

  // Before each step of the training loop: the unit to take the step for, waiting while the
  // client has given none; nullopt once training is over (the client's Finish, or
  // `finished` returning true, which is asked every second while waiting), and nullopt
  // without ending training when `interrupted` returns true (asked every 200 ms while
  // waiting: a planned stop of this worker). Either may be null.
  virtual std::optional<ps::WorkUnit> next_step(const std::function<bool()>& finished,
                                                const std::function<bool()>& interrupted) = 0;
  // After the step: what ps 0 said of it. A step of a unit no longer running (its client
  // gave up on it) is ignored.
  virtual void step_done(const ps::WorkUnit& unit, const ps::UnitOutcome& outcome) = 0;
  // Stops serving. A unit's call still running ends with `code` (UNAVAILABLE for a shutdown)
  // and `why`; with
  // `training_failed` (the training loop's own error, not a shutdown) it says so, and the
  // client reports the error instead of dispatching the unit again (step_client.h).
  virtual void stop(const std::string& why, ErrorCode code, bool training_failed) = 0;
};

}  // namespace cadre
