// Replicas without rows: a worker whose input has ended steps beside those whose input goes
// on, on an empty batch shaped as its first (DistributedIterator::no_rows), adding nothing.
#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/strategies/mirrored_strategy.h"

namespace cadre {
namespace {

// A replica with no rows (its worker's input has ended while others' goes on) steps on an
// empty batch shaped as its first: its loss and gradients over nothing are NaN, and it adds
// zeros with weight 0, so the update is the other replica's alone. A step in which no
// replica has a row applies nothing and says so.
TEST(StrategyTest, AReplicaWithoutRowsAddsNothingAndAStepWithoutAnyAppliesNothing) {
  Tensor x = Tensor::from_vector<float>({1, 2}, Shape{2, 1});
  auto strategy = MirroredStrategy::create(std::vector<Device>{Device::cpu(0), Device::cpu(1)});
  DistributedIterator it =
      strategy
          ->distribute_dataset(Dataset::from_tensor_slices(Features{{"x", x}}, x * 3.0).batch(2))
          .make_iterator();
  EXPECT_FALSE(it.no_rows().has_value());
  std::optional<PerReplica<Element>> batch = it.next();
  ASSERT_TRUE(batch.has_value());
  std::optional<PerReplica<Element>> none = it.no_rows();
  ASSERT_TRUE(none.has_value());
  ASSERT_EQ(none->size(), 2u);
  EXPECT_EQ((*none)[1].features.at("x").shape(), (Shape{0, 1}));
  EXPECT_EQ((*none)[1].labels.shape(), (Shape{0, 1}));
  EXPECT_EQ((*none)[1].labels.dtype(), DType::kFloat32);

  auto variables = strategy->create_variables(7);
  auto sgd = nn::optimizers::sgd(0.1);
  // Replica 0 steps on rows `rows0` of the batch, replica 1 on none.
  auto step = [&](const PerReplica<Element>& inputs) {
    return strategy->run<std::pair<bool, double>>(*variables, [&](ReplicaContext& ctx) {
      const Element& part = inputs[ctx.replica_id()];
      GradientTape tape;
      Tensor w = nn::get_variable("w", {1, 1}, nn::initializers::zeros()).read();
      Tensor loss = nn::mean_squared_error(part.labels, matmul(part.features.at("x"), w));
      std::vector<double> means{loss.item<double>()};
      bool applied = ctx.apply_gradients(*sgd, tape.gradient(loss, ctx.trainable_sources()),
                                         static_cast<double>(part.labels.dim(0)), {}, &means);
      return std::pair{applied, means[0]};
    });
  };
  PerReplica<Element> one_empty{(*batch)[0], (*none)[1]};
  ASSERT_EQ((*batch)[0].labels.dim(0), 1);  // x = 1, label 3
  auto stepped = step(one_empty);
  // d/dw (3 - w)^2 at 0 is -6: w = 0.6; the loss is replica 0's, 9.
  for (const auto& [applied, loss] : stepped) {
    EXPECT_TRUE(applied);
    EXPECT_DOUBLE_EQ(loss, 9.0);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(variables->store(r).find("w")->read().item<double>(), 0.6, 1e-6) << "replica " << r;
  }
  for (const auto& [applied, loss] : step(*none)) {
    EXPECT_FALSE(applied);
    EXPECT_EQ(loss, 0.0);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(variables->store(r).find("w")->read().item<double>(), 0.6, 1e-6) << "replica " << r;
  }
}

}  // namespace
}  // namespace cadre
