// TensorFlow Serving's gRPC services over an Inference: PredictionService (Predict, Classify,
// Regress, GetModelMetadata; MultiInference answers UNIMPLEMENTED) and ModelService
// (GetModelStatus), with the status codes TensorFlow Serving gives (NOT_FOUND for an unknown model
// or version, INVALID_ARGUMENT for bad inputs, RESOURCE_EXHAUSTED when overloaded).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "cadre/serving/model_server.h"
#include "serving/inference.h"
#include "serving/proto/serving_apis.grpc.pb.h"

namespace cadre::serving_internal {

class GrpcApi {
 public:
  // Listens on host:port (0: a free one). Throws UnavailableError when it cannot.
  GrpcApi(Inference& inference, const ServingOptions& options);
  ~GrpcApi();  // stop()

  int port() const { return port_; }
  // Stops taking calls; calls in flight finish first. Idempotent.
  void stop();

 private:
  class Prediction;
  class Models;

  std::unique_ptr<Prediction> prediction_;
  std::unique_ptr<Models> models_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace cadre::serving_internal
