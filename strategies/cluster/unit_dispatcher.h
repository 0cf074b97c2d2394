// The client's side of coordinator mode under parameter servers (docs/DEPLOY.md): cuts the
// steps left into units and runs each on whichever worker is free, in TensorFlow 2's
// ClusterCoordinator spirit. A worker that is lost (its call fails: dead, restarting, not
// started yet) gives its unit back to the queue, where the next free worker takes it; the
// lost worker is called again every `retry_seconds`, so that one restarted by its
// supervisor gets work again. ps 0's ledger (strategies/ps/unit_ledger.h) counts each step
// of a unit once, however often the unit runs, so the global step ends at exactly the
// steps dispatched. A worker whose input ended (its call fails OUT_OF_RANGE, or ps 0 holds
// its input pipeline ended) gives its unit back and gets no more; once every worker's input
// has ended, the run ends short of its steps, as Estimator.train ends when input_fn runs out.
//
// Not thread-safe: one run at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"

namespace cadre {

namespace ps {
class PsClient;
struct WorkUnit;
}  // namespace ps
class StepClient;

struct DispatchOptions {
  double retry_seconds = 1;  // between calls to a worker that was lost
  // A unit that runs longer than this on one worker is taken back from it (a hung worker).
  double unit_timeout_seconds = 3600;
  double finish_timeout_seconds = 5;
  // When every worker has been lost this long (none answers, or each fails at once), the
  // run ends with UnavailableError naming the last failure: a worker that cannot start
  // (a bad flag, missing data) must not leave the client waiting for ever.
  double all_lost_timeout_seconds = 600;
};

struct DispatchReport {
  int64_t units = 0;       // units completed
  int64_t dispatches = 0;  // calls that ran a unit or tried to
  int64_t lost = 0;        // units taken back from a worker that was lost
  // "worker:1" -> the steps it applied in units it completed (not those of units it lost)
  std::map<std::string, int64_t> steps_by_worker;
  bool stopped = false;      // the run was stopped (stop()) before every unit was complete
  int64_t abandoned = 0;     // units whose calls were abandoned, or failed, while it stopped
  bool input_ended = false;  // every worker's input ended before every unit was complete
};

class UnitDispatcher {
 public:
  // The workers of `cluster`; `ps0` holds the ledger and outlives this object.
  UnitDispatcher(const ClusterConfig& cluster, ps::PsClient& ps0, int64_t generation,
                 DispatchOptions options = {});
  ~UnitDispatcher();

  // Runs units [first_unit, ...) that cover `steps` steps, `steps_per_unit` each (the last
  // one shorter), and returns once ps 0 counts every one complete. On the calling thread,
  // `tick` runs about every 200 ms meanwhile with the report so far (the client saves
  // checkpoints and its progress there); an
  // exception from it stops the dispatch and is rethrown. A worker whose training failed
  // (WorkerTrainingError, other than UNAVAILABLE) ends the run with its error, once the
  // units running elsewhere have returned; so does losing every worker for
  // all_lost_timeout_seconds (UnavailableError); workers whose input ended are not waited
  // for.
  DispatchReport run(int64_t first_unit, int64_t steps, int64_t steps_per_unit,
                     const std::function<void(const DispatchReport& so_far)>& tick);

  // From `tick`: stops the run after that tick (a planned stop of the client). No unit is
  // dispatched from then on; the units running finish, for at most `drain_seconds`, after
  // which their calls are abandoned (each worker stops its unit after the step it is
  // taking, whose push ps 0 may still count; StepClient::cancel_units). run() then returns
  // the report so far, `stopped` set, once no call is running.
  void stop(double drain_seconds);

  // Tells every worker that training is over (those that do not answer find out from the
  // training_finished marker).
  void finish_workers();

 private:
  struct Shared;
  void serve(size_t worker, Shared& shared);
  // Whether the run is draining (stop()), in which case a unit whose call ended with `e` is
  // counted abandoned instead of given back.
  bool ended_while_draining(const std::string& task, const ps::WorkUnit& unit, const Error& e,
                            Shared& shared);
  // A lost worker's unit back to the front of the queue (logged the first time in a row).
  // Returns whether the worker's input has ended, which ends its dispatch loop (and the run,
  // once every worker's has).
  bool give_back(size_t worker, const ps::WorkUnit& unit, const Error& e, bool already_lost,
                 Shared& shared);
  // Whether ps 0 holds the input pipeline of `worker` ended (its worker told it).
  bool input_ended_on_ps0(size_t worker);
  // Throws UnavailableError once every worker whose input has not ended has been lost
  // all_lost_timeout_seconds.
  void check_not_all_lost(
      const std::vector<std::optional<std::chrono::steady_clock::time_point>>& lost_since,
      const std::vector<bool>& input_ended, const std::string& last_loss) const;
  // Waits retry_seconds before the lost worker is called again; true when the run stops.
  bool wait_to_retry(Shared& shared);

  std::vector<TaskId> tasks_;
  std::vector<int> pipelines_;  // each worker's input pipeline on ps 0: its index + 1
  std::vector<std::unique_ptr<StepClient>> workers_;
  ps::PsClient& ps0_;
  int64_t generation_;
  DispatchOptions options_;
  std::optional<double> drain_seconds_;  // set by stop()
};

}  // namespace cadre
