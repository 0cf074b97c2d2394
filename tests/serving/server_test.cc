// The model server with real clients over 127.0.0.1: plain HTTP requests and a gRPC stub
// generated from the same protos as TensorFlow Serving's clients get what the in-process
// Predictor gives; errors have TensorFlow Serving's codes and shapes and leave the server
// serving.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cadre/estimator/predictor.h"
#include "cadre/serving/model_server.h"
#include "serving/proto/serving_apis.grpc.pb.h"
#include "tests/serving/predict_request.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/mini_json.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::http_call;
using testing::JsonParser;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = dir_.file("export");
    version_dir_ = testing::export_version(dir_.file("model"), base_, 20, 1);
  }

  std::unique_ptr<ModelServer> start(ServingOptions options = {}) {
    options.export_base = base_;
    options.model_name = "toy";
    options.rest_port = 0;
    options.grpc_port = 0;
    return ModelServer::start(testing::serving_model_fn, options);
  }

  testing::TempDir dir_;
  std::string base_;
  std::string version_dir_;
};

TEST_F(ServerTest, RestPredictionsAreThePredictorsInBothFormats) {
  auto server = start();
  Tensor x = testing::serving_examples(5, 100);
  auto expected = Predictor::load(version_dir_, testing::serving_model_fn)->predict({{"x", x}});
  std::vector<float> probabilities = expected.at("probabilities").to_vector<float>();
  std::vector<int64_t> classes = expected.at("class").to_vector<int64_t>();

  auto reply =
      http_call(server->rest_port(), "POST", "/v1/models/toy:predict", testing::instances_json(x));
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto rows = JsonParser::parse(reply.body)["predictions"].array();
  ASSERT_EQ(rows.size(), 5u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["class"].number(), classes[i]);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(rows[i]["probabilities"].array()[k].number(), probabilities[i * 3 + k], 1e-6);
    }
  }
  // Columnar: {"inputs": {"x": batch}} gets {"outputs": {name: batch}}; one output unnamed.
  std::string columns = testing::instances_json(x);
  columns.replace(0, std::string("{\"instances\":").size(), "{\"inputs\":{\"x\":");
  reply =
      http_call(server->rest_port(), "POST", "/v1/models/toy/versions/1:predict", columns + "}");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto outputs = JsonParser::parse(reply.body)["outputs"];
  EXPECT_EQ(outputs["class"].array()[4].number(), classes[4]);
  auto scores = Predictor::load(version_dir_, testing::serving_model_fn)
                    ->predict({{"x", x}}, "scores")
                    .at("logits")
                    .to_vector<float>();
  reply = http_call(server->rest_port(), "POST", "/v1/models/toy:predict",
                    "{\"signature_name\":\"scores\"," + testing::instances_json(x).substr(1));
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto logits = JsonParser::parse(reply.body)["predictions"].array();
  EXPECT_NEAR(logits[2].array()[1].number(), scores[2 * 3 + 1], 1e-5);
}

TEST_F(ServerTest, StatusAndMetadataAreTensorFlowServings) {
  auto server = start();
  auto reply = http_call(server->rest_port(), "GET", "/v1/models/toy");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto status = JsonParser::parse(reply.body)["model_version_status"].array();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0]["version"].string(), "1");
  EXPECT_EQ(status[0]["state"].string(), "AVAILABLE");
  EXPECT_EQ(status[0]["status"]["error_code"].string(), "OK");

  reply = http_call(server->rest_port(), "GET", "/v1/models/toy/metadata");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto metadata = JsonParser::parse(reply.body);
  EXPECT_EQ(metadata["model_spec"]["version"].string(), "1");
  auto signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(signature["method_name"].string(), "tensorflow/serving/predict");
  auto input = signature["inputs"]["x"];
  EXPECT_EQ(input["dtype"].string(), "DT_FLOAT");
  EXPECT_EQ(input["tensor_shape"]["dim"].array()[0]["size"].string(), "-1");
  EXPECT_EQ(input["tensor_shape"]["dim"].array()[1]["size"].string(), "4");
  EXPECT_EQ(signature["outputs"]["class"]["dtype"].string(), "DT_INT64");
  EXPECT_TRUE(metadata["metadata"]["signature_def"]["signature_def"].has("scores"));
}

TEST_F(ServerTest, GrpcPredictionServiceIsThePredictors) {
  auto server = start();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = tensorflow::serving::PredictionService::NewStub(channel);
  Tensor x = testing::serving_examples(3, 200);
  auto expected = Predictor::load(version_dir_, testing::serving_model_fn)->predict({{"x", x}});

  tensorflow::serving::PredictRequest request = testing::predict_request(x);
  tensorflow::TensorProto& input = (*request.mutable_inputs())["x"];
  tensorflow::serving::PredictResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");
  const auto& probabilities = response.outputs().at("probabilities");
  ASSERT_EQ(probabilities.float_val_size(), 9);
  std::vector<float> want = expected.at("probabilities").to_vector<float>();
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(probabilities.float_val(i), want[i], 1e-6);
  const auto& classes = response.outputs().at("class");
  EXPECT_EQ(classes.dtype(), tensorflow::DT_INT64);
  EXPECT_EQ(classes.int64_val(2), expected.at("class").to_vector<int64_t>()[2]);

  // Raw tensor_content, and errors with TensorFlow Serving's codes.
  input.clear_float_val();
  std::vector<float> raw = x.to_vector<float>();
  input.set_tensor_content(std::string(reinterpret_cast<const char*>(raw.data()), raw.size() * 4));
  grpc::ClientContext again;
  ASSERT_TRUE(stub->Predict(&again, request, &response).ok());
  input.mutable_tensor_shape()->mutable_dim(1)->set_size(5);
  grpc::ClientContext bad_shape;
  EXPECT_EQ(stub->Predict(&bad_shape, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  input.mutable_tensor_shape()->mutable_dim(0)->set_size(int64_t{1} << 40);
  input.mutable_tensor_shape()->mutable_dim(1)->set_size(int64_t{1} << 40);
  grpc::ClientContext overflowing;
  EXPECT_EQ(stub->Predict(&overflowing, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_model_spec()->set_name("other");
  grpc::ClientContext unknown;
  EXPECT_EQ(stub->Predict(&unknown, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);

  auto models = tensorflow::serving::ModelService::NewStub(channel);
  tensorflow::serving::GetModelStatusRequest status_request;
  status_request.mutable_model_spec()->set_name("toy");
  tensorflow::serving::GetModelStatusResponse status_response;
  grpc::ClientContext status_context;
  ASSERT_TRUE(models->GetModelStatus(&status_context, status_request, &status_response).ok());
  ASSERT_EQ(status_response.model_version_status_size(), 1);
  EXPECT_EQ(status_response.model_version_status(0).state(),
            tensorflow::serving::ModelVersionStatus::AVAILABLE);

  tensorflow::serving::GetModelMetadataRequest metadata_request;
  metadata_request.mutable_model_spec()->set_name("toy");
  metadata_request.add_metadata_field("signature_def");
  tensorflow::serving::GetModelMetadataResponse metadata;
  grpc::ClientContext metadata_context;
  ASSERT_TRUE(stub->GetModelMetadata(&metadata_context, metadata_request, &metadata).ok());
  tensorflow::serving::SignatureDefMap signatures;
  ASSERT_TRUE(metadata.metadata().at("signature_def").UnpackTo(&signatures));
  EXPECT_EQ(signatures.signature_def().at("serving_default").inputs().at("x").dtype(),
            tensorflow::DT_FLOAT);
}

}  // namespace
}  // namespace cadre
