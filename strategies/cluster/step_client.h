// A worker's StepService (step_server.h) as the client of coordinator mode reaches it: one
// unit at a time, with the job's token on every call. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "cadre/strategies/cluster_security.h"
#include "cadre/strategies/cluster_spec.h"
#include "strategies/cluster/grpc_security.h"
#include "strategies/cluster/step_service.grpc.pb.h"
#include "strategies/ps/work_unit.h"

namespace cadre {

// What run_unit throws when the worker's own training failed (model_fn, the input, a NaN
// loss...), rather than the worker being lost: the worker's error, with its code, which the
// client reports instead of dispatching the unit again.
class WorkerTrainingError : public Error {
 public:
  WorkerTrainingError(ErrorCode code, const std::string& message) : Error(code, message) {}
};

class StepClient {
 public:
  StepClient(TaskId task, std::string address, const ClusterSecurity& security);
  // "worker:1 (127.0.0.1:2223)"
  const std::string& name() const { return name_; }

  // Runs `unit` on the worker and returns how it ended. Throws Cadre's error with the
  // worker's code, naming it: UnavailableError when it is not there (dead, or not started
  // yet), DeadlineExceededError after `timeout_seconds`, FailedPreconditionError when it is
  // running another unit; WorkerTrainingError when its training failed.
  steps::RunUnitResponse run_unit(const ps::WorkUnit& unit, double timeout_seconds);
  // Tells the worker that training is over; throws as run_unit does.
  void finish(double timeout_seconds);
  // Abandons the unit running, if any, and every run_unit from now on: each throws
  // CancelledError at once. The worker stops the unit after the step it is taking (which
  // ps 0 may still count); a client that stops (a planned stop) calls it.
  void cancel_units();

 private:
  std::string name_;
  ClusterSecurity security_;
  JobToken token_;
  std::unique_ptr<steps::StepService::Stub> stub_;
  Mutex mutex_;
  grpc::ClientContext* running_ CADRE_GUARDED_BY(mutex_) = nullptr;  // run_unit's call
  bool cancelled_ CADRE_GUARDED_BY(mutex_) = false;
};

}  // namespace cadre
