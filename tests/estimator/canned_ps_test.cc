// A wide & deep model on parameter servers (two ps tasks on 127.0.0.1 in this process, the
// chief alone training): its two optimizers, Ftrl for linear/ and Adagrad for dnn/, each pushed
// a step, train it as one device does, to the same variables and slots.
#include <gtest/gtest.h>

#include <algorithm>

#include "cadre/estimator/canned.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/ps_server.h"
#include "tests/support/job_secret.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

namespace fc = feature_column;
using testing::TempDir;

// 128 rows of x in [-1, 1) and a color, the class x > 0; batches of 16.
InputFn ps_rows(bool repeat) {
  return [=](const InputContext&) {
    size_t i = 0;
    io::Dataset d = io::Dataset::from_generator([=]() mutable -> std::optional<io::Element> {
      if (i == 128) return std::nullopt;
      float x = static_cast<float>(i * 37 % 128) / 64.0f - 1.0f;
      const char* color = i++ % 3 ? "red" : "blue";
      return io::Element{
          {{"x", Tensor::from_vector(std::vector<float>{x})}, {"color", io::bytes_tensor(color)}},
          Tensor::from_vector(std::vector<int64_t>{x > 0 ? 1 : 0})};
    });
    if (repeat) d = d.repeat();
    auto x = fc::numeric_column("x");
    auto color = fc::categorical_column_with_vocabulary_list("color", {"red", "blue"});
    return d
        .map(fc::transform_fn(
            {x, color, fc::bucketized_column(x, {-0.5, 0, 0.5}), fc::embedding_column(color, 2)}))
        .padded_batch(16, -1);
  };
}

Estimator wide_and_deep(const std::string& model_dir, std::shared_ptr<const Strategy> strategy) {
  auto x = fc::numeric_column("x");
  auto color = fc::categorical_column_with_vocabulary_list("color", {"red", "blue"});
  RunConfig config;
  config.model_dir = model_dir;
  config.tf_random_seed = 11;
  config.train_distribute = std::move(strategy);
  return dnn_linear_combined_classifier(
      {.feature_columns = {color, fc::bucketized_column(x, {-0.5, 0, 0.5})}},
      {.hidden_units = {8}, .feature_columns = {x, fc::embedding_column(color, 2)}}, config);
}

TEST(CannedPsTest, WideAndDeepTrainsOnParameterServersAsOnOneDevice) {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  std::string addresses;
  for (int i = 0; i < 2; ++i) {
    ps::ServerOptions options;
    options.task = "ps:" + std::to_string(i);
    options.security = testing::test_security();
    servers.push_back(ps::ParameterServer::start("127.0.0.1:0", options));
    addresses += (i ? ", \"" : "\"") + servers.back()->address() + "\"";
  }
  ClusterConfig chief =
      parse_tf_config(R"({"cluster": {"chief": ["127.0.0.1:39999"], "ps": [)" + addresses +
                      R"(]}, "task": {"type": "chief", "index": 0}})");
  chief.security = testing::test_security();
  ParameterServerOptions options;
  options.placement.min_slice_bytes = 16;  // slice even these small variables over both
  options.init_timeout_seconds = 30;
  options.connect_timeout_seconds = 10;

  TempDir dir;
  Estimator on_ps = wide_and_deep(
      dir.file("ps"), ParameterServerStrategy::create(chief, {Device::cpu(0)}, options));
  Estimator alone = wide_and_deep(dir.file("one"), nullptr);
  EXPECT_EQ(on_ps.train(ps_rows(true), {.max_steps = 40}), 40);
  alone.train(ps_rows(true), {.max_steps = 40});

  std::vector<std::string> names = on_ps.get_variable_names();
  for (const char* name :
       {"linear/linear_model/color/weights/Ftrl/accumulator",
        "linear/linear_model/color/weights/Ftrl/linear",
        "dnn/hiddenlayer_0/kernel/Adagrad/accumulator", "Ftrl/iterations", "Adagrad/iterations"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const std::string& name : alone.get_variable_names()) {
    Tensor expected = alone.get_variable_value(name);
    Tensor got = on_ps.get_variable_value(name);
    ASSERT_EQ(got.shape(), expected.shape()) << name;
    std::vector<double> a = got.to_vector<double>(), b = expected.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << name << "[" << i << "]";
  }
  EXPECT_EQ(on_ps.get_variable_value("Ftrl/iterations").item<int64_t>(), 40);
  EXPECT_EQ(on_ps.get_variable_value("Adagrad/iterations").item<int64_t>(), 40);
}

}  // namespace
}  // namespace cadre
