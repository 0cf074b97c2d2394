// Ftrl against tf.keras's (TensorFlow 2.15.1, tf.keras.optimizers.legacy.Ftrl with
// learning_rate 0.1, initial_accumulator_value 0.1, l1 0.01, l2 0.02, l2_shrinkage 0.005,
// beta 0.1): the variable and both slots after the same gradients, dense and sparse.
#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/nn/optimizers.h"
#include "core/nn/optimizer_config.h"

namespace cadre {
namespace {

nn::optimizers::FtrlOptions tf_options(double power) {
  nn::optimizers::FtrlOptions o;
  o.learning_rate_power = power;
  o.l1 = 0.01;
  o.l2 = 0.02;
  o.l2_shrinkage = 0.005;
  o.beta = 0.1;
  return o;
}

void expect_values(const Tensor& actual, const std::vector<double>& expected, const char* what) {
  std::vector<double> got = actual.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 2e-6) << what << i;
}

struct Expected {
  std::vector<double> var, accumulator, linear;
};

void expect_dense(double power, const Expected& tf) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{4}, nn::initializers::zeros());
  w.assign(Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 0.5f, 0.0f}));
  auto ftrl = nn::optimizers::ftrl(0.1, tf_options(power));
  for (const std::vector<float>& g :
       {std::vector<float>{0.1f, -0.2f, 0.3f, 0.0f}, std::vector<float>{0.5f, 0.1f, -0.4f, 0.2f},
        std::vector<float>{-0.3f, 0.3f, 0.1f, -0.1f}}) {
    ftrl->apply_gradients({Tensor::from_vector(g)}, {&w});
  }
  expect_values(w.tensor(), tf.var, "var");
  expect_values(store.find("w/Ftrl/accumulator")->tensor(), tf.accumulator, "accumulator");
  expect_values(store.find("w/Ftrl/linear")->tensor(), tf.linear, "linear");
}

TEST(FtrlTest, DenseUpdatesAreTfKerasFtrls) {
  expect_dense(
      -0.5,
      {{-0.021512649953365326, -0.26434579491615295, 0.09554319828748703, -0.0193000677973032},
       {0.45000001788139343, 0.24000000953674316, 0.36000001430511475, 0.15000000596046448},
       {0.1766844093799591, 1.5799442529678345, -0.682624101638794, 0.10482090711593628}});
  expect_dense(
      -0.3,
      {{-0.019321618601679802, -0.18101045489311218, 0.06644841283559799, -0.01388886384665966},
       {0.45000001788139343, 0.24000000953674316, 0.36000001430511475, 0.15000000596046448},
       {0.18215179443359375, 1.3779385089874268, -0.5681812167167664, 0.1030573695898056}});
}

// Rows 2, 0 and 2 again: the repeated row's gradients are summed, untouched rows stay.
TEST(FtrlTest, SparseUpdatesTouchOnlyTheirRowsAsTfKerasDoes) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::Variable& w = nn::get_variable("w", Shape{4, 2}, nn::initializers::zeros());
  w.assign(Tensor::from_vector(
      std::vector<float>{1.0f, -1.0f, 0.5f, 0.25f, 2.0f, -3.0f, 0.0f, 0.1f}, Shape{4, 2}));
  IndexedSlices g{
      Tensor::from_vector(std::vector<int64_t>{2, 0, 2}),
      Tensor::from_vector(std::vector<float>{0.1f, 0.2f, 0.3f, -0.4f, 0.5f, 0.6f}, Shape{3, 2}),
      Shape{4, 2}};
  nn::optimizers::ftrl(0.1, tf_options(-0.5))->apply_gradients({g}, {&w});
  expect_values(w.tensor(),
                {0.16237038373947144, -0.24706587195396423, 0.5, 0.25, 0.8450301885604858,
                 -1.7713717222213745, 0.0, 0.10000000149011612},
                "var");
  expect_values(store.find("w/Ftrl/accumulator")->tensor(),
                {0.19, 0.26, 0.1, 0.1, 0.46, 0.74, 0.1, 0.1}, "accumulator");
  expect_values(store.find("w/Ftrl/linear")->tensor(),
                {-0.8866212964057922, 1.5267423391342163, 0.0, 0.0, -6.620105266571045,
                 17.09014320373535, 0.0, 0.0},
                "linear");
}

TEST(FtrlTest, BadSettingsAreRefusedAndTheConfigRoundTrips) {
  nn::optimizers::FtrlOptions positive;
  positive.learning_rate_power = 0.5;
  EXPECT_THROW(nn::optimizers::ftrl(0.1, positive), InvalidArgumentError);
  nn::optimizers::FtrlOptions negative;
  negative.l1 = -1;
  EXPECT_THROW(nn::optimizers::ftrl(0.1, negative), InvalidArgumentError);
  nn::OptimizerConfig config = nn::optimizers::ftrl(0.1, tf_options(-0.3))->config();
  EXPECT_EQ(config.kind, "ftrl");
  EXPECT_EQ(nn::optimizer_from_config(config)->config().numbers, config.numbers);
}

}  // namespace
}  // namespace cadre
