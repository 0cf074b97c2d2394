#include "strategies/ps/ps_client.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/deadline.h"
#include "strategies/cluster/grpc_security.h"

namespace cadre::ps {
namespace {

// Slack for calls that wait on the server for their own timeout.
constexpr double kMargin = 10;

// "'<first>'" or "'<first>' and <n> more": what a request is about, for its errors.
template <typename Names>
std::string subject(const Names& names) {
  if (names.empty()) return "nothing";
  std::string out = str_cat("'", names[0], "'");
  if (names.size() > 1) out += str_cat(" and ", names.size() - 1, " more");
  return out;
}

std::string subject_of(const PushRequest& request) {
  std::vector<std::string> names;
  for (const PushItem& item : request.items()) names.push_back(item.name());
  for (const NamedTensor& t : request.slots()) names.push_back(t.name());
  for (const NamedTensor& t : request.deltas()) names.push_back(t.name());
  return subject(names);
}

}  // namespace

PsClient::PsClient(int index, std::string address, ClientOptions options)
    : address_(std::move(address)),
      name_(str_cat("ps:", index, " (", address_, ")")),
      options_(options),
      token_(options_.security) {
  grpc::ChannelArguments args;
  int limit = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  channel_ = grpc::CreateCustomChannel(address_, channel_credentials(options_.security), args);
  stub_ = ParameterServerService::NewStub(channel_);
}

void PsClient::wait_until_ready(double timeout_seconds) {
  auto start = std::chrono::steady_clock::now();
  while (true) {
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_seconds) {
      throw DeadlineExceededError(str_cat("parameter server ", name_, " did not answer within ",
                                          timeout_seconds, " s (is it running at that address?)"));
    }
    if (channel_->WaitForConnected(deadline_after(std::min(10.0, timeout_seconds - waited))))
      return;
    LOG(INFO) << "waiting for parameter server " << name_ << " ("
              << static_cast<int>(waited + std::min(10.0, timeout_seconds - waited)) << " s)";
  }
}

template <typename Request, typename Response, typename Method>
Response PsClient::call(const std::string& what, const Request& request, Method method,
                        double timeout_seconds) {
  int64_t size = static_cast<int64_t>(request.ByteSizeLong());
  if (size > options_.max_message_bytes) {
    // Variables are sliced and transfers batched to fit (message_budget.h): only a single
    // row larger than the limit, or a bug, comes here.
    throw InternalError(str_cat(what, " to parameter server ", name_, ": a request of ", size,
                                " bytes, over the message limit of ", options_.max_message_bytes,
                                " bytes that Cadre cuts its requests to fit (is one row of the "
                                "variable larger than ParameterServerOptions.max_message_bytes?)"));
  }
  grpc::ClientContext context;
  context.set_deadline(deadline_after(timeout_seconds));
  token_.add_to(context);
  Response response;
  grpc::Status status = (stub_.get()->*method)(&context, request, &response);
  bytes_sent_ += size;
  if (!status.ok()) {
    std::string message =
        str_cat(what, " at parameter server ", name_, ": ", status.error_message());
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      message += refusal_hint(options_.security);
    }
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      message +=
          "; training cannot go on without it (restart the cluster: training resumes "
          "from the last checkpoint)";
    }
    throw_error(static_cast<ErrorCode>(status.error_code()), message);
  }
  bytes_received_ += static_cast<int64_t>(response.ByteSizeLong());
  return response;
}

CreateResponse PsClient::create(const CreateRequest& request) {
  // A restore reads from the task's disk, which may be slow: it gets the longer of the two.
  double timeout = request.has_initial_value() ? options_.rpc_timeout_seconds
                   : request.has_restore()
                       ? std::max(options_.rpc_timeout_seconds, request.timeout_seconds() + kMargin)
                       : request.timeout_seconds() + kMargin;
  return call<CreateRequest, CreateResponse>(
      str_cat("creating variable '", request.variable().name(), "'"), request,
      &ParameterServerService::Stub::Create, timeout);
}

PullResponse PsClient::pull(const PullRequest& request) {
  std::vector<std::string_view> names;
  for (const PullItem& item : request.items()) names.push_back(item.name());
  PullResponse response = call<PullRequest, PullResponse>(
      str_cat("pulling ", subject(names)), request, &ParameterServerService::Stub::Pull,
      options_.rpc_timeout_seconds);
  bytes_pulled_ += static_cast<int64_t>(response.ByteSizeLong());
  if (response.planned_stop()) planned_stop_heard_ = true;
  return response;
}

PushResponse PsClient::push(const PushRequest& request) {
  PushResponse response = call<PushRequest, PushResponse>(
      str_cat("pushing to ", subject_of(request)), request, &ParameterServerService::Stub::Push,
      std::max(options_.rpc_timeout_seconds, request.timeout_seconds() + kMargin));
  bytes_pushed_ += static_cast<int64_t>(request.ByteSizeLong());
  if (response.planned_stop()) planned_stop_heard_ = true;
  return response;
}

int64_t PsClient::global_step(std::optional<int64_t> set, double timeout_seconds) {
  GlobalStepRequest request;
  request.set_set(set.has_value());
  request.set_value(set.value_or(0));
  request.set_timeout_seconds(timeout_seconds);
  return call<GlobalStepRequest, GlobalStepResponse>("the global step", request,
                                                     &ParameterServerService::Stub::GlobalStep,
                                                     timeout_seconds + kMargin)
      .value();
}

ReadResponse PsClient::read(const ReadRequest& request) {
  std::string what = request.names().empty() ? std::string("listing the variables")
                                             : str_cat("reading ", subject(request.names()));
  return call<ReadRequest, ReadResponse>(what, request, &ParameterServerService::Stub::Read,
                                         options_.rpc_timeout_seconds);
}

UnitsResponse PsClient::units(const UnitsRequest& request) {
  return call<UnitsRequest, UnitsResponse>("the coordinator's units", request,
                                           &ParameterServerService::Stub::Units,
                                           options_.rpc_timeout_seconds);
}

InputPositionsResponse PsClient::input_positions(const InputPositionsRequest& request) {
  return call<InputPositionsRequest, InputPositionsResponse>(
      "the workers' input positions", request, &ParameterServerService::Stub::InputPositions,
      options_.rpc_timeout_seconds);
}

SaveResponse PsClient::save(const SaveRequest& request) {
  return call<SaveRequest, SaveResponse>(
      str_cat("saving checkpoint part '", request.file_name(), "'"), request,
      &ParameterServerService::Stub::Save, options_.rpc_timeout_seconds);
}

SaveStatusResponse PsClient::save_status(const SaveStatusRequest& request) {
  return call<SaveStatusRequest, SaveStatusResponse>(
      str_cat("writing checkpoint part '", request.file_name(), "'"), request,
      &ParameterServerService::Stub::SaveStatus, request.timeout_seconds() + kMargin);
}

void PsClient::planned_stop() {
  call<PlannedStopRequest, PlannedStopResponse>(
      "telling the chief's planned stop", PlannedStopRequest(),
      &ParameterServerService::Stub::PlannedStop, options_.rpc_timeout_seconds);
}

}  // namespace cadre::ps
