#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "cadre/nn/metrics.h"
#include "cadre/nn/variable_store.h"

namespace cadre {
namespace {

TEST(MetricsTest, AccuracyFromClassIdsOrScores) {
  nn::Accuracy acc;
  acc.update(Tensor::from_vector<int64_t>({1, 2, 0}), Tensor::from_vector<int64_t>({1, 0, 0}));
  EXPECT_NEAR(acc.result(), 2.0 / 3, 1e-12);
  acc.update(Tensor::from_vector<int32_t>({1}),
             Tensor::from_vector<float>({0.1f, 0.7f, 0.2f}, Shape{1, 3}));
  EXPECT_NEAR(acc.result(), 3.0 / 4, 1e-12);
  acc.reset();
  EXPECT_EQ(acc.result(), 0);
  EXPECT_THROW(acc.update(Tensor::from_vector<int64_t>({1, 2}), Tensor::zeros(Shape{2, 2, 2})),
               InvalidArgumentError);
}

TEST(MetricsTest, MeanWithWeightsAndMerge) {
  nn::Mean a, b;
  a.update(Tensor(), Tensor::from_vector<float>({1, 3}), Tensor::from_vector<float>({1, 3}));
  EXPECT_DOUBLE_EQ(a.result(), 2.5);
  b.update(Tensor::from_vector<float>({7}));
  a.merge(b);
  EXPECT_DOUBLE_EQ(a.result(), (1 + 9 + 7) / 5.0);
  nn::Accuracy other;
  EXPECT_THROW(a.merge(other), InvalidArgumentError);
}

TEST(MetricsTest, PrecisionRecall) {
  Tensor labels = Tensor::from_vector<float>({1, 0, 1, 1, 0});
  Tensor preds = Tensor::from_vector<float>({0.9f, 0.8f, 0.2f, 0.6f, 0.1f});
  nn::Precision p;
  nn::Recall r;
  p.update(labels, preds);
  r.update(labels, preds);
  EXPECT_NEAR(p.result(), 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.result(), 2.0 / 3, 1e-12);
}

TEST(MetricsTest, AucMatchesKeras) {
  // tf.keras.metrics.AUC(num_thresholds=3) on this batch gives 0.75.
  nn::Auc three("auc", 3);
  three.update(Tensor::from_vector<float>({0, 0, 1, 1}),
               Tensor::from_vector<float>({0, 0.5f, 0.3f, 0.9f}));
  EXPECT_NEAR(three.result(), 0.75, 1e-9);
  nn::Auc fine;
  fine.update(Tensor::from_vector<float>({0, 0, 1, 1}),
              Tensor::from_vector<float>({0.1f, 0.4f, 0.35f, 0.8f}));
  EXPECT_NEAR(fine.result(), 0.75, 0.01);
  nn::Auc perfect;
  perfect.update(Tensor::from_vector<float>({0, 1}), Tensor::from_vector<float>({0.2f, 0.7f}));
  EXPECT_NEAR(perfect.result(), 1.0, 0.01);
}

TEST(MetricsTest, FunctionalFormsAccumulateInTheStore) {
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  nn::metrics::accuracy(Tensor::from_vector<int64_t>({1}), Tensor::from_vector<int64_t>({1}));
  auto m =
      nn::metrics::accuracy(Tensor::from_vector<int64_t>({1}), Tensor::from_vector<int64_t>({0}));
  EXPECT_DOUBLE_EQ(m->result(), 0.5);
  EXPECT_EQ(store.metrics().size(), 1u);
  EXPECT_TRUE(store.variables().empty());
}

}  // namespace
}  // namespace cadre
