#include "serving/grpc_api.h"

#include <glog/logging.h>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "serving/tensor_proto.h"

namespace cadre::serving_internal {

namespace {

namespace apis = tensorflow::serving;

// Runs `body`, turning Cadre's errors into the gRPC status of the same code.
template <typename Body>
grpc::Status guarded(grpc::ServerContext* context, const std::string& token, Body body) {
  auto metadata = context->client_metadata();
  auto found = metadata.find("authorization");
  std::string_view authorization =
      found == metadata.end() ? std::string_view()
                              : std::string_view(found->second.data(), found->second.size());
  if (!authorized(token, authorization)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this server requires the metadata \"authorization: Bearer <token>\"");
  }
  try {
    body();
    return grpc::Status::OK;
  } catch (const Error& error) {
    return grpc::Status(static_cast<grpc::StatusCode>(error.code()), error.what());
  } catch (const std::exception& error) {
    LOG(ERROR) << "gRPC " << context->peer() << ": " << error.what();
    return grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  }
}

std::optional<int64_t> requested_version(const apis::ModelSpec& spec, const std::string& model) {
  if (spec.name() != model) {
    throw NotFoundError(str_cat("Servable not found for request: model '", spec.name(),
                                "' (this server serves '", model, "')"));
  }
  if (spec.version_choice_case() == apis::ModelSpec::kVersionLabel) {
    throw InvalidArgumentError(str_cat("version labels ('", spec.version_label(),
                                       "') are not supported; give a version number"));
  }
  if (spec.has_version()) return spec.version().value();
  return std::nullopt;
}

// TLS with the server's certificate and key when the options name them (no client
// certificates: the bearer token says who may call).
std::shared_ptr<grpc::ServerCredentials> credentials(const ServingOptions& options) {
  if (options.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  auto read = [](const std::string& path, const char* what) {
    try {
      return posix_env()->read_file(path);
    } catch (const Error& error) {
      throw InvalidArgumentError(
          str_cat("TLS: cannot read the ", what, " ", path, ": ", error.what()));
    }
  };
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back(
      {read(options.tls_key_file, "private key"), read(options.tls_cert_file, "certificate")});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

class GrpcApi::Prediction final : public apis::PredictionService::Service {
 public:
  Prediction(Inference& inference, const ServingOptions& options)
      : inference_(inference), options_(options) {}

  grpc::Status Predict(grpc::ServerContext* context, const apis::PredictRequest* request,
                       apis::PredictResponse* response) override {
    return guarded(context, options_.bearer_token, [&] {
      std::optional<int64_t> version =
          requested_version(request->model_spec(), options_.model_name);
      auto decode = [&](const TensorSpecs&) {
        io::Features inputs;
        for (const auto& [name, proto] : request->inputs()) {
          inputs.set(name, from_tensor_proto(proto, str_cat("input '", name, "'")));
        }
        return inputs;
      };
      std::vector<std::string> filter(request->output_filter().begin(),
                                      request->output_filter().end());
      auto prediction = inference_.predict(inference_.arrive(), version,
                                           request->model_spec().signature_name(), decode, filter);
      for (const auto& [name, tensor] : prediction.outputs) {
        to_tensor_proto(tensor, &(*response->mutable_outputs())[name]);
      }
      fill_spec(prediction.version, prediction.signature, response->mutable_model_spec());
    });
  }

  grpc::Status Classify(grpc::ServerContext* context, const apis::ClassificationRequest* request,
                        apis::ClassificationResponse* response) override {
    return guarded(context, options_.bearer_token, [&] {
      serving_internal::Prediction prediction =
          run_examples(request->model_spec(), request->input(), ExportOutput::Kind::kClassify);
      auto* result = response->mutable_result();
      for (const Classification& classes :
           classifications(prediction.outputs, prediction.export_output)) {
        auto* out = result->add_classifications();
        for (const auto& [label, score] : classes) {
          auto* item = out->add_classes();
          item->set_label(label);
          item->set_score(score);
        }
      }
      fill_spec(prediction.version, prediction.signature, response->mutable_model_spec());
    });
  }

  grpc::Status Regress(grpc::ServerContext* context, const apis::RegressionRequest* request,
                       apis::RegressionResponse* response) override {
    return guarded(context, options_.bearer_token, [&] {
      serving_internal::Prediction prediction =
          run_examples(request->model_spec(), request->input(), ExportOutput::Kind::kRegress);
      auto* result = response->mutable_result();
      for (float value : regressions(prediction.outputs, prediction.export_output)) {
        result->add_regressions()->set_value(value);
      }
      fill_spec(prediction.version, prediction.signature, response->mutable_model_spec());
    });
  }

  grpc::Status GetModelMetadata(grpc::ServerContext* context,
                                const apis::GetModelMetadataRequest* request,
                                apis::GetModelMetadataResponse* response) override {
    return guarded(context, options_.bearer_token, [&] {
      std::optional<int64_t> version =
          requested_version(request->model_spec(), options_.model_name);
      for (const std::string& field : request->metadata_field()) {
        if (field != "signature_def") {
          throw InvalidArgumentError(str_cat(
              "metadata field '", field, "' is not supported; the one there is: signature_def"));
        }
      }
      std::shared_ptr<LoadedVersion> loaded = inference_.versions().get(version);
      (*response->mutable_metadata())["signature_def"].PackFrom(signature_defs(*loaded));
      fill_spec(loaded->version(), "", response->mutable_model_spec());
    });
  }

 private:
  serving_internal::Prediction run_examples(const apis::ModelSpec& spec, const apis::Input& input,
                                            ExportOutput::Kind kind) {
    std::optional<int64_t> version = requested_version(spec, options_.model_name);
    Batcher::Arrival arrival = inference_.arrive();
    ExampleBatch batch;
    const auto& examples = input.has_example_list_with_context()
                               ? input.example_list_with_context().examples()
                               : input.example_list().examples();
    if (input.kind_case() == apis::Input::KIND_NOT_SET) {
      throw InvalidArgumentError(
          "the request's input has no examples: set input.example_list or "
          "input.example_list_with_context");
    }
    for (const proto::Example& example : examples)
      batch.examples.push_back(example_features(example));
    if (input.has_example_list_with_context()) {
      batch.context = example_features(input.example_list_with_context().context());
    }
    return inference_.run_examples(std::move(arrival), version, spec.signature_name(), kind, batch);
  }

  void fill_spec(int64_t version, const std::string& signature, apis::ModelSpec* spec) const {
    spec->set_name(options_.model_name);
    spec->mutable_version()->set_value(version);
    spec->set_signature_name(signature);
  }

  Inference& inference_;
  const ServingOptions& options_;
};

class GrpcApi::Models final : public apis::ModelService::Service {
 public:
  Models(Inference& inference, const ServingOptions& options)
      : inference_(inference), options_(options) {}

  grpc::Status GetModelStatus(grpc::ServerContext* context,
                              const apis::GetModelStatusRequest* request,
                              apis::GetModelStatusResponse* response) override {
    return guarded(context, options_.bearer_token, [&] {
      std::optional<int64_t> version =
          requested_version(request->model_spec(), options_.model_name);
      *response = model_status(inference_.versions(), version);
    });
  }

 private:
  Inference& inference_;
  const ServingOptions& options_;
};

GrpcApi::GrpcApi(Inference& inference, const ServingOptions& options)
    : prediction_(std::make_unique<Prediction>(inference, options)),
      models_(std::make_unique<Models>(inference, options)) {
  std::string address = str_cat(options.host, ":", options.grpc_port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials(options), &port_);
  // A second server on the port would otherwise share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(options.max_request_bytes, INT32_MAX)));
  // A Predict handler blocks until its batch has run, so the sync server's default of 1-2
  // threads polling for calls left the next calls waiting for one: at concurrency 8 the MLP
  // got 4.8-5.0k calls/s, 8 to 32 pollers 11.4k (docs/benchmarks/2026-11-28-serving.md).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 8);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 32);
  builder.RegisterService(prediction_.get());
  builder.RegisterService(models_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw UnavailableError(str_cat("gRPC API: cannot listen on ", address));
  }
}

GrpcApi::~GrpcApi() { stop(); }

void GrpcApi::stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->Wait();
  server_.reset();
}

}  // namespace cadre::serving_internal
