// A worker of coordinator mode (coordinated_tasks.h): Estimator::train, with a gate before
// each step that waits for the client's unit and tags the step's push with it.
#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "cadre/estimator/estimator.h"
#include "core/base/strings.h"
#include "estimator/coordinated_tasks.h"
#include "estimator/training_finished.h"
#include "strategies/cluster/step_server.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// Lets a step run only for a unit the client gave: before the step it waits for one (and
// ends the run once training is over); after it, tells the server how ps 0 counted the step.
class UnitGate : public Hook {
 public:
  UnitGate(StepServer& server, ps::WorkUnitSlot& slot, std::function<bool()> finished)
      : server_(server), slot_(slot), finished_(std::move(finished)) {}

  void before_run(Run& run, RunContext& context) override {
    unit_ = server_.next_step(finished_);
    slot_.set(unit_);
    if (!unit_) {
      LOG(INFO) << "the client says training is over (global step " << run.global_step() << ")";
      context.request_stop();
    }
  }

  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    std::optional<ps::UnitOutcome> outcome = slot_.last();
    if (unit_ && outcome && outcome->unit == unit_->id) server_.step_done(*unit_, *outcome);
  }

 private:
  StepServer& server_;
  ps::WorkUnitSlot& slot_;
  std::function<bool()> finished_;
  std::optional<ps::WorkUnit> unit_;
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
    std::optional<TrainingFinished> marker =
        read_finished_marker(*env, model_dir);
    return marker && (!max_steps || marker->step >= *max_steps);
  };
  TrainArgs args;
  args.hooks = train_spec.hooks;
  args.hooks.push_back(std::make_shared<UnitGate>(*server, servers->work_unit(), finished));
  try {
    int64_t step = estimator.train(train_spec.input_fn, args);
    server->stop("training ended", ErrorCode::kUnavailable, /*training_failed=*/false);
    return step;
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
