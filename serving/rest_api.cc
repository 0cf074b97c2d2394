#include "serving/rest_api.h"

#include <glog/logging.h>
#include <google/protobuf/util/json_util.h>

#include <charconv>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/rest_examples.h"
#include "serving/rest_json.h"

namespace cadre::serving_internal {

namespace {

HttpResponse error_json(int status, const std::string& message) {
  return HttpResponse{status, str_cat("{\"error\":", json_quote(message), "}")};
}

std::string to_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) throw InternalError(str_cat("cannot write JSON: ", status.message()));
  return json;
}

// The parts of a /v1/models/... path.
struct Route {
  std::string model;
  std::optional<int64_t> version;
  std::string suffix;  // "", "/metadata", ":predict", ":classify", ...
};

std::optional<Route> parse_route(std::string_view path) {
  constexpr std::string_view kPrefix = "/v1/models/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  size_t end = path.find_first_of("/:");
  Route route;
  route.model = std::string(path.substr(0, end));
  path = end == std::string_view::npos ? std::string_view() : path.substr(end);
  constexpr std::string_view kVersions = "/versions/";
  if (path.substr(0, kVersions.size()) == kVersions) {
    path.remove_prefix(kVersions.size());
    size_t digits = std::min(path.find_first_of("/:"), path.size());
    int64_t version = 0;
    auto [stop, error] = std::from_chars(path.data(), path.data() + digits, version);
    if (error != std::errc() || stop != path.data() + digits || digits == 0) return std::nullopt;
    route.version = version;
    path.remove_prefix(digits);
  }
  route.suffix = std::string(path);
  if (route.model.empty()) return std::nullopt;
  return route;
}

}  // namespace

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancelled:
      return 499;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kOutOfRange:
      return 400;
    case ErrorCode::kDeadlineExceeded:
      return 504;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kAborted:
      return 409;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnimplemented:
      return 501;
    case ErrorCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

HttpResponse RestApi::handle(const HttpRequest& request) {
  const std::string* authorization = request.header("authorization");
  if (!authorized(options_.bearer_token, authorization ? *authorization : "")) {
    return error_json(401, "this server requires \"Authorization: Bearer <token>\"");
  }
  try {
    return route(request);
  } catch (const Error& error) {
    return error_json(http_status(error.code()), error.what());
  } catch (const std::exception& error) {
    LOG(ERROR) << "REST " << request.method << " " << request.target << ": " << error.what();
    return error_json(500, error.what());
  }
}

HttpResponse RestApi::route(const HttpRequest& request) {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  std::optional<Route> route = parse_route(path);
  if (!route) return error_json(404, str_cat("Malformed request: ", request.method, " ", path));
  if (route->model != options_.model_name) {
    throw NotFoundError(str_cat("Servable not found for request: model '", route->model,
                                "' (this server serves '", options_.model_name, "')"));
  }
  bool get = route->suffix.empty() || route->suffix == "/metadata";
  if ((get && request.method != "GET") || (!get && request.method != "POST")) {
    return error_json(405, str_cat("Malformed request: ", request.method, " ", path, " takes ",
                                   get ? "GET" : "POST"));
  }
  if (route->suffix.empty())
    return {200, to_json(model_status(inference_.versions(), route->version))};
  if (route->suffix == "/metadata") return metadata(route->version);
  if (route->suffix == ":predict") return predict(route->version, request.body);
  if (route->suffix == ":classify") {
    return examples(route->version, request.body, ExportOutput::Kind::kClassify);
  }
  if (route->suffix == ":regress") {
    return examples(route->version, request.body, ExportOutput::Kind::kRegress);
  }
  return error_json(404, str_cat("Malformed request: ", request.method, " ", path));
}

HttpResponse RestApi::predict(std::optional<int64_t> version, const std::string& body) {
  Batcher::Arrival arrival = inference_.arrive();
  PredictBody parsed = parse_predict_body(body, options_.max_json_depth);
  Prediction prediction =
      inference_.predict(std::move(arrival), version, parsed.signature_name,
                         [&](const TensorSpecs& specs) { return decode_inputs(parsed, specs); });
  return {200, encode_predictions(prediction.outputs, parsed.row_format)};
}

HttpResponse RestApi::examples(std::optional<int64_t> version, const std::string& body,
                               ExportOutput::Kind kind) {
  Batcher::Arrival arrival = inference_.arrive();
  ExamplesBody parsed = parse_examples_body(body, options_.max_json_depth);
  Prediction prediction = inference_.run_examples(std::move(arrival), version,
                                                  parsed.signature_name, kind, parsed.batch);
  if (kind == ExportOutput::Kind::kClassify) {
    return {200,
            encode_classifications(classifications(prediction.outputs, prediction.export_output))};
  }
  return {200, encode_regressions(regressions(prediction.outputs, prediction.export_output))};
}

HttpResponse RestApi::metadata(std::optional<int64_t> version) {
  std::shared_ptr<LoadedVersion> loaded = inference_.versions().get(version);
  tensorflow::serving::ModelSpec spec;
  spec.set_name(options_.model_name);
  spec.mutable_version()->set_value(loaded->version());
  return {200, str_cat("{\"model_spec\":", to_json(spec), ",\"metadata\":{\"signature_def\":",
                       to_json(signature_defs(*loaded)), "}}")};
}

}  // namespace cadre::serving_internal
