// TensorFlow Serving's REST API over an Inference:
//   POST /v1/models/NAME[/versions/V]:predict    {"instances": ...} or {"inputs": ...}
//   POST /v1/models/NAME[/versions/V]:classify   {"examples": [...], "context": {...}}
//   POST /v1/models/NAME[/versions/V]:regress    likewise
//   GET  /v1/models/NAME[/versions/V]            the versions' status
//   GET  /v1/models/NAME[/versions/V]/metadata   the signatures
// Errors are {"error": "..."} with the HTTP status TensorFlow Serving gives the error's
// code (400 bad input, 404 unknown model/version, 429 overload, ...).
#pragma once

#include <string>

#include "cadre/serving/model_server.h"
#include "serving/http_server.h"
#include "serving/inference.h"

namespace cadre::serving_internal {

// The HTTP status TensorFlow Serving answers an error of `code` with.
int http_status(ErrorCode code);

class RestApi {
 public:
  RestApi(Inference& inference, const ServingOptions& options)
      : inference_(inference), options_(options) {}

  // Never throws: every failure is an error response.
  HttpResponse handle(const HttpRequest& request);

 private:
  HttpResponse route(const HttpRequest& request);
  HttpResponse predict(std::optional<int64_t> version, const std::string& body);
  HttpResponse examples(std::optional<int64_t> version, const std::string& body,
                        ExportOutput::Kind kind);
  HttpResponse metadata(std::optional<int64_t> version);

  Inference& inference_;
  const ServingOptions options_;
};

}  // namespace cadre::serving_internal
