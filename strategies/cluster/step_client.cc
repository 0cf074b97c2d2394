#include "strategies/cluster/step_client.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/deadline.h"
#include "strategies/cluster/step_server.h"

namespace cadre {

StepClient::StepClient(TaskId task, std::string address, const ClusterSecurity& security)
    : name_(str_cat(task.to_string(), " (", address, ")")), security_(security), token_(security) {
  // A worker that died comes back at the same address: reconnect within a second rather
  // than after gRPC's default backoff of up to two minutes.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  stub_ = steps::StepService::NewStub(
      grpc::CreateCustomChannel(address, channel_credentials(security), args));
}

steps::RunUnitResponse StepClient::run_unit(const ps::WorkUnit& unit, double timeout_seconds) {
  steps::RunUnitRequest request;
  request.set_generation(unit.generation);
  request.set_unit(unit.id);
  request.set_steps(unit.steps);
  grpc::ClientContext context;
  context.set_deadline(deadline_after(timeout_seconds));
  token_.add_to(context);
  steps::RunUnitResponse response;
  {
    MutexLock lock(mutex_);
    if (cancelled_) throw CancelledError(str_cat("unit ", unit.id, " on ", name_, ": abandoned"));
    running_ = &context;
  }
  grpc::Status status = stub_->RunUnit(&context, request, &response);
  {
    MutexLock lock(mutex_);
    running_ = nullptr;
  }
  if (!status.ok()) {
    std::string message = str_cat("unit ", unit.id, " on ", name_, ": ", status.error_message());
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      message += refusal_hint(security_);
    }
    if (context.GetServerTrailingMetadata().count(kTrainingFailedKey)) {
      throw WorkerTrainingError(static_cast<ErrorCode>(status.error_code()), message);
    }
    throw_error(static_cast<ErrorCode>(status.error_code()), message);
  }
  return response;
}

void StepClient::cancel_units() {
  MutexLock lock(mutex_);
  cancelled_ = true;
  if (running_) running_->TryCancel();
}

void StepClient::finish(double timeout_seconds) {
  grpc::ClientContext context;
  context.set_deadline(deadline_after(timeout_seconds));
  token_.add_to(context);
  steps::FinishResponse response;
  grpc::Status status = stub_->Finish(&context, steps::FinishRequest(), &response);
  if (!status.ok()) {
    throw_error(static_cast<ErrorCode>(status.error_code()),
                str_cat("finishing ", name_, ": ", status.error_message()));
  }
}

}  // namespace cadre
