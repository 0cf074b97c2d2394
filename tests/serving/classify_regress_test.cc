// TensorFlow Serving's Classify and Regress over an export's classification and regression
// signatures: REST (:classify, :regress) and gRPC (a stub from the same protos as TensorFlow
// Serving's clients) answer what the in-process Predictor gives for the same rows, with
// tf.Examples (and a context) turned into the model's inputs; bad examples and wrong
// signatures are INVALID_ARGUMENT naming what is wrong, and the server keeps serving. Also
// the export side: the kind recorded in export.json, and specs that cannot be exported.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cadre/base/errors.h"
#include "cadre/estimator/predictor.h"
#include "cadre/serving/model_server.h"
#include "serving/proto/serving_apis.grpc.pb.h"
#include "tests/serving/serving_test_support.h"
#include "tests/support/mini_json.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::http_call;
using testing::JsonParser;

class ClassifyRegressTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    version_dir_ =
        new std::string(testing::export_version(dir_->file("model"), dir_->file("export"), 20, 1));
  }
  static void TearDownTestSuite() {
    delete version_dir_;
    delete dir_;
  }

  std::unique_ptr<ModelServer> start() {
    ServingOptions options;
    options.export_base = dir_->file("export");
    options.model_name = "toy";
    options.rest_port = 0;
    options.grpc_port = 0;
    return ModelServer::start(testing::serving_model_fn, options);
  }

  static std::map<std::string, Tensor> expected(const Tensor& x, const std::string& signature) {
    return Predictor::load(*version_dir_, testing::serving_model_fn)
        ->predict({{"x", x}}, signature);
  }

  // {"examples": [{"x": [...]}, ...]} for the rows of x, with `extra` members before.
  static std::string examples_json(const Tensor& x, const std::string& extra = "") {
    std::vector<float> values = x.to_vector<float>();
    std::string json = "{" + extra + "\"examples\":[";
    for (int64_t row = 0; row < x.dim(0); ++row) {
      json += row ? ",{\"x\":[" : "{\"x\":[";
      for (int64_t col = 0; col < x.dim(1); ++col) {
        char number[32];
        std::snprintf(number, sizeof number, "%s%.9g", col ? "," : "",
                      values[row * x.dim(1) + col]);
        json += number;
      }
      json += "]}";
    }
    return json + "]}";
  }

  // A Classify request for the first `rows` rows of x on the classification signature.
  static tensorflow::serving::ClassificationRequest classify_request(const Tensor& x,
                                                                     int64_t rows) {
    tensorflow::serving::ClassificationRequest request;
    request.mutable_model_spec()->set_name("toy");
    request.mutable_model_spec()->set_signature_name("classification");
    for (int64_t row = 0; row < rows; ++row) {
      add_example(x, row, request.mutable_input()->mutable_example_list()->add_examples());
    }
    return request;
  }

  static void add_example(const Tensor& x, int64_t row, proto::Example* example) {
    std::vector<float> values = x.to_vector<float>();
    auto& list = *(*example->mutable_features()->mutable_feature())["x"].mutable_float_list();
    for (int64_t col = 0; col < x.dim(1); ++col) list.add_value(values[row * x.dim(1) + col]);
  }

  static testing::TempDir* dir_;
  static std::string* version_dir_;
};

testing::TempDir* ClassifyRegressTest::dir_ = nullptr;
std::string* ClassifyRegressTest::version_dir_ = nullptr;

TEST_F(ClassifyRegressTest, RestClassifyAndRegressAreThePredictors) {
  auto server = start();
  int port = server->rest_port();
  Tensor x = testing::serving_examples(4, 300);
  std::vector<float> probabilities =
      expected(x, "classification").at("probabilities").to_vector<float>();

  auto reply = http_call(port, "POST", "/v1/models/toy:classify",
                         examples_json(x, "\"signature_name\":\"classification\","));
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto results = JsonParser::parse(reply.body)["results"].array();
  ASSERT_EQ(results.size(), 4u);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].array().size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(results[i].array()[k].array()[0].string(), testing::kServingClassNames[k]);
      EXPECT_NEAR(results[i].array()[k].array()[1].number(), probabilities[i * 3 + k], 1e-6);
    }
  }

  // Labels from the class ids: one class per example, score 0.
  std::vector<int64_t> ids = expected(x, "classes").at("class").to_vector<int64_t>();
  reply = http_call(port, "POST", "/v1/models/toy/versions/1:classify",
                    examples_json(x, "\"signature_name\":\"classes\","));
  ASSERT_EQ(reply.status, 200) << reply.body;
  results = JsonParser::parse(reply.body)["results"].array();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].array().size(), 1u);
    EXPECT_EQ(results[i].array()[0].array()[0].string(), testing::kServingClassNames[ids[i]]);
    EXPECT_EQ(results[i].array()[0].array()[1].number(), 0);
  }

  // Regress without a signature name: the one regression signature.
  std::vector<float> values = expected(x, "regression").at("value").to_vector<float>();
  reply = http_call(port, "POST", "/v1/models/toy:regress", examples_json(x));
  ASSERT_EQ(reply.status, 200) << reply.body;
  results = JsonParser::parse(reply.body)["results"].array();
  ASSERT_EQ(results.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(results[i].number(), values[i], 1e-6);

  // The features in the context, shared by examples that hold none of their own (a feature
  // of an example's own wins).
  std::string one_row = examples_json(x.slice(0, 0, 1));
  std::string context = one_row.substr(one_row.find("{\"x\""));
  context = context.substr(0, context.size() - 2);
  reply = http_call(port, "POST", "/v1/models/toy:regress",
                    "{\"context\":" + context + ",\"examples\":[{}, {\"y\": 1}, " +
                        examples_json(x.slice(0, 1, 2)).substr(13));
  ASSERT_EQ(reply.status, 200) << reply.body;
  results = JsonParser::parse(reply.body)["results"].array();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_NEAR(results[0].number(), values[0], 1e-6);
  EXPECT_NEAR(results[1].number(), values[0], 1e-6);
  EXPECT_NEAR(results[2].number(), values[1], 1e-6);

  // The metadata describes them as TensorFlow does.
  reply = http_call(port, "GET", "/v1/models/toy/metadata");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto defs = JsonParser::parse(reply.body)["metadata"]["signature_def"]["signature_def"];
  EXPECT_EQ(defs["classification"]["method_name"].string(), "tensorflow/serving/classify");
  EXPECT_EQ(defs["classification"]["inputs"]["inputs"]["dtype"].string(), "DT_STRING");
  EXPECT_EQ(defs["classification"]["outputs"]["scores"]["dtype"].string(), "DT_FLOAT");
  EXPECT_EQ(defs["classification"]["outputs"]["classes"]["dtype"].string(), "DT_STRING");
  EXPECT_EQ(defs["regression"]["method_name"].string(), "tensorflow/serving/regress");
  EXPECT_EQ(defs["regression"]["outputs"]["outputs"]["dtype"].string(), "DT_FLOAT");
  EXPECT_EQ(defs["serving_default"]["method_name"].string(), "tensorflow/serving/predict");
}

TEST_F(ClassifyRegressTest, BadExamplesAndSignaturesAreNamed) {
  auto server = start();
  int port = server->rest_port();
  struct Case {
    std::string target;
    std::string body;
    std::string says;
  };
  std::string row = "{\"x\": [1, 2, 3, 4]}";
  std::vector<Case> cases = {
      {":classify", "{\"examples\": [" + row + "]}",
       "'serving_default' is a predict signature (version 1's Classify signatures: "
       "classes, classification)"},
      {":classify", "{\"signature_name\": \"regression\", \"examples\": [" + row + "]}",
       "'regression' is a regress signature"},
      {":classify", "{\"signature_name\": \"nope\", \"examples\": [" + row + "]}",
       "no signature 'nope'"},
      {":predict", "{\"signature_name\": \"classification\", \"instances\": [[1, 2, 3, 4]]}",
       "use :classify"},
      {":regress", "{\"examples\": [{\"y\": [1, 2, 3, 4]}]}",
       "examples[0] has no feature 'x' (nor has the context); input 'x' takes float32 [4]"},
      {":regress", "{\"examples\": [" + row + ", {\"x\": [1, 2, 3]}]}",
       "examples[1] feature 'x' has 3 values; input 'x' takes float32 [4] (4 values per example)"},
      {":regress", "{\"examples\": [{\"x\": [\"a\", \"b\", \"c\", \"d\"]}]}",
       "examples[0] feature 'x' is a bytes list"},
      {":regress", "{\"examples\": [{\"x\": [[1, 2], [3, 4]]}]}", "a flat list"},
      {":regress", "{\"examples\": [{\"x\": [1, \"b\", 3, 4]}]}", "mixes numbers and strings"},
      {":regress", "{\"examples\": [[1, 2, 3, 4]]}", "examples[0] must be an object"},
      {":regress", "{\"examples\": {}}", "\"examples\", a non-empty list"},
      {":regress", "{\"context\": [], \"examples\": [" + row + "]}",
       "\"context\" must be an object"},
      {":regress", "{\"examples\": [" + row, "not valid JSON"},
  };
  for (const Case& c : cases) {
    auto reply = http_call(port, "POST", "/v1/models/toy" + c.target, c.body);
    EXPECT_EQ(reply.status, 400) << c.body << ": " << reply.body;
    auto json = JsonParser::parse(reply.body);
    ASSERT_TRUE(json.has("error")) << reply.body;
    EXPECT_NE(json["error"].string().find(c.says), std::string::npos)
        << c.body << ": " << json["error"].string();
  }
  auto reply = http_call(port, "POST", "/v1/models/toy:regress", "{\"examples\": [" + row + "]}");
  EXPECT_EQ(reply.status, 200) << reply.body;
}

std::unique_ptr<tensorflow::serving::PredictionService::Stub> grpc_stub(int port) {
  return tensorflow::serving::PredictionService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

TEST_F(ClassifyRegressTest, GrpcClassifyAndRegressAreThePredictors) {
  auto server = start();
  auto stub = grpc_stub(server->grpc_port());
  Tensor x = testing::serving_examples(3, 400);
  std::vector<float> probabilities =
      expected(x, "classification").at("probabilities").to_vector<float>();
  std::vector<float> values = expected(x, "regression").at("value").to_vector<float>();

  tensorflow::serving::ClassificationResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->Classify(&context, classify_request(x, 3), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_spec().version().value(), 1);
  EXPECT_EQ(response.model_spec().signature_name(), "classification");
  ASSERT_EQ(response.result().classifications_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const auto& classes = response.result().classifications(i);
    ASSERT_EQ(classes.classes_size(), 3);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(classes.classes(k).label(), testing::kServingClassNames[k]);
      EXPECT_NEAR(classes.classes(k).score(), probabilities[i * 3 + k], 1e-6);
    }
  }

  // Regress with a context example holding the feature of the second row.
  tensorflow::serving::RegressionRequest regression;
  regression.mutable_model_spec()->set_name("toy");
  auto* with_context = regression.mutable_input()->mutable_example_list_with_context();
  add_example(x, 0, with_context->add_examples());
  with_context->add_examples();  // takes the context's
  add_example(x, 1, with_context->mutable_context());
  tensorflow::serving::RegressionResponse regressed;
  grpc::ClientContext regress_context;
  status = stub->Regress(&regress_context, regression, &regressed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(regressed.model_spec().signature_name(), "regression");
  ASSERT_EQ(regressed.result().regressions_size(), 2);
  EXPECT_NEAR(regressed.result().regressions(0).value(), values[0], 1e-6);
  EXPECT_NEAR(regressed.result().regressions(1).value(), values[1], 1e-6);
}

// INVALID_ARGUMENT naming what is wrong: no input, a missing feature, a long one, a predict
// signature; NOT_FOUND for an unknown model.
TEST_F(ClassifyRegressTest, GrpcBadClassifyRequestsNameWhatIsWrong) {
  auto server = start();
  auto stub = grpc_stub(server->grpc_port());
  const tensorflow::serving::ClassificationRequest request =
      classify_request(testing::serving_examples(3, 400), 3);
  auto refused = [&](const tensorflow::serving::ClassificationRequest& bad,
                     const std::string& says) {
    grpc::ClientContext bad_context;
    tensorflow::serving::ClassificationResponse ignored;
    grpc::Status got = stub->Classify(&bad_context, bad, &ignored);
    EXPECT_EQ(got.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << says;
    EXPECT_NE(got.error_message().find(says), std::string::npos) << got.error_message();
  };
  tensorflow::serving::ClassificationRequest bad = request;
  bad.clear_input();
  refused(bad, "has no examples");
  bad = request;
  (*bad.mutable_input()
        ->mutable_example_list()
        ->mutable_examples(1)
        ->mutable_features()
        ->mutable_feature())
      .erase("x");
  refused(bad, "examples[1] has no feature 'x'");
  bad = request;
  (*bad.mutable_input()
        ->mutable_example_list()
        ->mutable_examples(2)
        ->mutable_features()
        ->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(1);
  refused(bad, "examples[2] feature 'x' has 5 values");
  bad = request;
  bad.mutable_model_spec()->set_signature_name("serving_default");
  refused(bad, "'serving_default' is a predict signature");
  bad.mutable_model_spec()->set_name("other");
  grpc::ClientContext unknown;
  tensorflow::serving::ClassificationResponse ignored;
  EXPECT_EQ(stub->Classify(&unknown, bad, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ClassifyRegressTest, TheExportRecordsEachSignaturesKind) {
  std::ifstream file(*version_dir_ + "/export.json");
  std::stringstream text;
  text << file.rdbuf();
  auto signatures = JsonParser::parse(text.str())["signatures"];
  EXPECT_EQ(signatures["classification"]["kind"].string(), "classify");
  EXPECT_EQ(signatures["classification"]["scores"].string(), "probabilities");
  EXPECT_EQ(signatures["classification"]["class_names"].array().size(), 3u);
  EXPECT_EQ(signatures["classes"]["classes"].string(), "class");
  EXPECT_EQ(signatures["regression"]["kind"].string(), "regress");
  EXPECT_EQ(signatures["regression"]["value"].string(), "value");
  // Readers that know predict signatures only still find the keys each one reads.
  EXPECT_EQ(signatures["regression"]["outputs"].array()[0].string(), "value");
  EXPECT_FALSE(signatures["serving_default"].has("kind"));

  auto predictor = Predictor::load(*version_dir_, testing::serving_model_fn);
  EXPECT_EQ(predictor->export_output("classification").kind, ExportOutput::Kind::kClassify);
  EXPECT_EQ(predictor->export_output("classification").class_names, testing::kServingClassNames);
  EXPECT_EQ(predictor->export_output("regression").value, "value");
  EXPECT_EQ(predictor->export_output("scores").kind, ExportOutput::Kind::kPredict);
}

TEST_F(ClassifyRegressTest, SpecsThatCannotBeServedAreRefusedAtExport) {
  Tensor scores = Tensor::zeros(Shape{2, 3}, DType::kFloat32);
  Tensor ids = Tensor::zeros(Shape{2}, DType::kInt64);
  auto refused = [&](ExportOutput output, const std::string& says) {
    EstimatorSpec spec = EstimatorSpec::predict({{"p", scores}, {"id", ids}}, {{"sig", output}});
    try {
      spec.validate(ModeKeys::kPredict);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidArgumentError& error) {
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
    }
  };
  refused(ExportOutput::classification("q", {}), "names scores 'q', which is not among");
  refused(ExportOutput::classification("p", {"a", "b"}), "2 class names for 3 score columns");
  refused(ExportOutput::classification("id", {}), "must be floating point [batch, classes]");
  refused(ExportOutput::classification_with_classes("p", "id"), "has 1 per example where scores");
  refused(ExportOutput::classification_with_classes("", "p"), "must be integer class ids");
  refused(ExportOutput::classification("", {}), "needs scores or classes");
  refused(ExportOutput::regression("p"), "[batch] or [batch, 1]");
  refused(ExportOutput({"nope"}), "names prediction 'nope'");
  EstimatorSpec fine =
      EstimatorSpec::predict({{"p", scores}, {"id", ids}},
                             {{"a", ExportOutput::classification("p", ExportOutput::class_ids(3))},
                              {"b", ExportOutput::classification_with_classes("", "id")}});
  EXPECT_NO_THROW(fine.validate(ModeKeys::kPredict));
  EXPECT_EQ(ExportOutput::class_ids(3), (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace cadre
