// A worker of coordinator mode (coordinated_tasks.h): Estimator::train, with a gate before
// each step that waits for the client's unit and tags the step's push with it. A planned
// stop ends the unit after the step in flight (the training loop's own check) or the wait
// for a unit (the gate's); the worker's service then answers the client UNAVAILABLE, so
// that the rest of the unit goes to another worker, each step counted once on ps 0. A worker
// whose input ends answers OUT_OF_RANGE, and the client gives its units to the others.
#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "cadre/estimator/estimator.h"
#include "core/base/strings.h"
#include "estimator/coordinated_tasks.h"
#include "estimator/stop_notice.h"
#include "estimator/training_finished.h"
#include "strategies/cluster/step_server.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// Lets a step run only for a unit the client gave: before the step it waits for one (and
// ends the run once training is over, or at a planned stop's notice); after it, tells the
// server how ps 0 counted the step.
class UnitGate : public Hook {
 public:
  UnitGate(StepServer& server, ps::WorkUnitSlot& slot, std::function<bool()> finished,
           StopNotice& notice)
      : server_(server), slot_(slot), finished_(std::move(finished)), notice_(notice) {}

  void before_run(Run& run, RunContext& context) override {
    unit_ = server_.next_step(finished_, [this] { return notice_.requested(); });
    slot_.set(unit_);
    stepping_ = unit_.has_value();
    if (unit_) return;
    if (notice_.requested()) {
      LOG(WARNING) << notice_.reason() << ": a planned stop while waiting for a unit (global step "
                   << run.global_step() << ")";
      stopped_at_ = run.global_step();
    } else {
      LOG(INFO) << "the client says training is over (global step " << run.global_step() << ")";
    }
    context.request_stop();
  }

  // The global step of a planned stop the gate made while waiting; nullopt otherwise.
  std::optional<int64_t> stopped_at() const { return stopped_at_; }
  // Whether the loop ended between the gate's unit and the step's end: only the end of
  // this worker's input ends it there.
  bool input_ended() const { return stepping_; }

  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    stepping_ = false;
    std::optional<ps::UnitOutcome> outcome = slot_.last();
    if (unit_ && outcome && outcome->unit == unit_->id) server_.step_done(*unit_, *outcome);
  }

 private:
  StepServer& server_;
  ps::WorkUnitSlot& slot_;
  std::function<bool()> finished_;
  StopNotice& notice_;
  std::optional<ps::WorkUnit> unit_;
  std::optional<int64_t> stopped_at_;
  bool stepping_ = false;
};

}  // namespace

int64_t serve_steps(Estimator& estimator, const TrainSpec& train_spec) {
  const RunConfig& config = estimator.config();
  const ps::ParameterServers* servers =
      config.train_distribute ? config.train_distribute->extended().parameter_servers() : nullptr;
  if (!servers) {
    throw InvalidArgumentError(
        "a worker of coordinator mode (a client in TF_CONFIG's cluster) runs the client's "
        "steps under ParameterServerStrategy; set train_distribute = "
        "ParameterServerStrategy::create(*config.cluster)");
  }
  StepServerOptions options;
  options.task = config.cluster->task.to_string();
  options.security = config.cluster->security;
  std::unique_ptr<StepServer> server =
      StepServer::start(config.cluster->address(config.cluster->task), options);
  std::shared_ptr<Env> env = config.file_system();
  std::string model_dir = estimator.model_dir();
  std::optional<int64_t> max_steps = train_spec.max_steps;
  auto finished = [env, model_dir, max_steps] {
    std::optional<TrainingFinished> marker = read_finished_marker(*env, model_dir);
    return marker && (!max_steps || marker->step >= *max_steps);
  };
  // The training loop has its own notice; the gate's stops the wait for a unit.
  StopNotice notice(config.planned_stop);
  auto gate = std::make_shared<UnitGate>(*server, servers->work_unit(), finished, notice);
  TrainArgs args;
  args.hooks = train_spec.hooks;
  args.hooks.push_back(gate);
  try {
    int64_t step = estimator.train(train_spec.input_fn, args);
    if (std::optional<int64_t> stopped = gate->stopped_at()) {
      throw_planned_stop(str_cat("a planned stop (", notice.reason(), ") at step ", *stopped,
                                 " while waiting for a unit; the same command serves again"),
                         *stopped);
    }
    if (gate->input_ended()) {
      // ps 0 holds this worker's input ended too (the training loop told it).
      server->stop(str_cat("its input ended at global step ", step), ErrorCode::kOutOfRange,
                   /*training_failed=*/false);
      return step;
    }
    server->stop("training ended", ErrorCode::kUnavailable, /*training_failed=*/false);
    return step;
  } catch (const PlannedStopError& e) {
    // Not the training's failure: the client gives the rest of the unit to another worker.
    server->stop(e.what(), ErrorCode::kUnavailable, /*training_failed=*/false);
    throw;
  } catch (const Error& e) {
    server->stop(str_cat("its training failed: ", e.what()), e.code(), /*training_failed=*/true);
    throw;
  } catch (const std::exception& e) {
    server->stop(str_cat("its training failed: ", e.what()), ErrorCode::kInternal,
                 /*training_failed=*/true);
    throw;
  }
}

}  // namespace cadre::estimator_internal
