// Layers and losses on a batch with no rows: what a MultiWorkerMirrored worker whose input
// has ended runs while the others' input goes on (it adds zeros with weight 0). Nothing may
// fail, every variable's gradient keeps its shape (the all-reduce's layout), and batch
// normalisation keeps its moving statistics (the mean of nothing is not a statistic).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"

namespace cadre {
namespace {

// The loss's gradients with respect to every trainable variable of `store`: defined ones of
// the variable's shape, and finite. Returns them by name.
std::map<std::string, Gradient> expect_gradients_shaped(const nn::VariableStore& store,
                                                        GradientTape& tape, const Tensor& loss) {
  std::vector<Tensor> sources;
  for (nn::Variable* v : store.trainable_variables()) sources.push_back(v->tensor());
  std::vector<Gradient> gradients = tape.gradient(loss, sources);
  std::map<std::string, Gradient> by_name;
  EXPECT_EQ(gradients.size(), sources.size());
  for (size_t i = 0; i < gradients.size() && i < sources.size(); ++i) {
    const std::string name = store.trainable_variables()[i]->name();
    by_name[name] = gradients[i];
    if (!gradients[i].defined()) continue;
    EXPECT_EQ(gradients[i].shape(), sources[i].shape()) << name;
    if (gradients[i].is_sparse()) continue;
    for (double g : gradients[i].to_dense().to_vector<double>()) {
      EXPECT_TRUE(std::isfinite(g)) << name;
    }
  }
  return by_name;
}

TEST(NoRowsTest, DenseConvolutionPoolingAndLossesRunOnABatchWithNoRows) {
  nn::VariableStore store(/*seed=*/1);
  nn::VariableStoreScope scope(store);
  for (int64_t rows : {2, 0}) {  // variables made by a batch with rows, as in training
    GradientTape tape;
    Tensor images = random_normal({rows, 6, 6, 2});
    Tensor x = nn::conv2d("conv", images, 3, {3, 3}, nn::relu);
    x = nn::max_pool2d(x, {2, 2}, {2, 2});
    x = nn::avg_pool2d(x, {2, 2}, {1, 1});
    x = nn::dropout(nn::flatten(x), 0.5, /*training=*/true);
    Tensor logits = nn::dense("logits", nn::dense("hidden", x, 4, nn::relu), 3);
    Tensor labels = Tensor::zeros(Shape{rows}, DType::kInt64);
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits) +
                  nn::mean_squared_error(Tensor::zeros(Shape{rows, 3}), logits) +
                  nn::sigmoid_cross_entropy(Tensor::zeros(Shape{rows, 3}), logits);
    EXPECT_EQ(logits.shape(), (Shape{rows, 3}));
    for (const auto& [name, gradient] : expect_gradients_shaped(store, tape, loss)) {
      EXPECT_TRUE(gradient.defined()) << name;  // as on the workers with rows
    }
  }
}

TEST(NoRowsTest, EmbeddingsGiveNoRowsAndBatchNormKeepsItsMovingStatistics) {
  nn::VariableStore store(/*seed=*/1);
  nn::VariableStoreScope scope(store);
  std::vector<float> moving_mean;
  for (int64_t rows : {4, 0}) {
    GradientTape tape;
    Tensor ids = Tensor::zeros(Shape{rows, 2}, DType::kInt64);
    Tensor x = nn::flatten(nn::embedding("embedding", ids, 10, 3));
    x = nn::batch_norm("norm", x, /*training=*/true);
    Tensor loss = nn::mean_squared_error(Tensor::zeros(Shape{rows, 1}), nn::dense("out", x, 1));
    std::map<std::string, Gradient> gradients = expect_gradients_shaped(store, tape, loss);
    const Gradient& looked_up = gradients["embedding/embeddings"];
    ASSERT_TRUE(looked_up.is_sparse());
    EXPECT_EQ(looked_up.sparse().indices.numel(), rows * 2);
    for (const char* name : {"norm/gamma", "norm/beta", "out/kernel"}) {
      EXPECT_TRUE(gradients[name].defined()) << name;  // the others' layout
    }
    if (rows > 0) moving_mean = store.find("norm/moving_mean")->read().to_vector<float>();
  }
  EXPECT_EQ(store.find("norm/moving_mean")->read().to_vector<float>(), moving_mean);
  for (float v : store.find("norm/moving_variance")->read().to_vector<float>()) {
    EXPECT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace cadre
