// The Fashion-MNIST source and the input_fn pipeline of ARCHITECTURE.md.
#include <gtest/gtest.h>

#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/io/input_context.h"
#include "cadre/io/mnist.h"

namespace cadre::io {
namespace {

bool installed() { return std::filesystem::exists(kFashionMnistDirectory); }

TEST(MnistDatasetTest, ElementsAreScaledImagesAndClassLabels) {
  if (!installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ImagesAndLabels raw = read_mnist(kFashionMnistDirectory, Split::kTest);
  Iterator it = fashion_mnist(kFashionMnistDirectory, Split::kTest).make_iterator();
  for (int64_t i = 0; i < 3; ++i) {
    auto e = it.next();
    ASSERT_TRUE(e);
    const Tensor& image = e->features.at("image");
    EXPECT_EQ(image.shape(), (Shape{784}));
    EXPECT_EQ(image.dtype(), DType::kFloat32);
    std::vector<float> pixels = image.to_vector<float>();
    std::vector<int> bytes = raw.images.slice(0, i, i + 1).to_vector<int>();
    for (size_t k = 0; k < pixels.size(); ++k) ASSERT_EQ(pixels[k], bytes[k] / 255.0f) << k;
    EXPECT_EQ(e->labels.dtype(), DType::kInt64);
    EXPECT_EQ(e->labels.item<int64_t>(), raw.labels.slice(0, i, i + 1).item<int64_t>());
  }
  auto r = fashion_mnist(kFashionMnistDirectory, Split::kTest, ImageFormat::kRawBytes)
               .make_iterator()
               .next();
  EXPECT_EQ(r->features.at("image").shape(), (Shape{784}));
  EXPECT_EQ(r->features.at("image").dtype(), DType::kUInt8);
}

TEST(MnistDatasetTest, ScalePixelsEqualsFloatDivisionForEveryByte) {
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
  std::vector<float> scaled = scale_pixels(Tensor::from_vector(bytes, {16, 16})).to_vector<float>();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(scaled[i], static_cast<float>(i) / 255.0f) << i;
  EXPECT_THROW(scale_pixels(Tensor::zeros({3})), InvalidArgumentError);
}

TEST(MnistDatasetTest, ScalingAfterBatchGivesTheSameBatches) {
  if (!installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Iterator scaled_first = fashion_mnist(kFashionMnistDirectory, Split::kTest)
                              .shuffle(1000, 3)
                              .batch(64)
                              .make_iterator();
  Iterator scaled_last = fashion_mnist(kFashionMnistDirectory, Split::kTest, ImageFormat::kRawBytes)
                             .shuffle(1000, 3)
                             .batch(64)
                             .map(scale_pixels_fn())
                             .make_iterator();
  for (int b = 0; b < 3; ++b) {
    auto x = scaled_first.next(), y = scaled_last.next();
    EXPECT_EQ(x->features.at("image").to_vector<float>(),
              y->features.at("image").to_vector<float>());
    EXPECT_EQ(x->labels.to_vector<int64_t>(), y->labels.to_vector<int64_t>());
  }
}

TEST(MnistDatasetTest, ArchitectureInputFnPipeline) {
  if (!installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  InputContext ctx{.num_input_pipelines = 2, .input_pipeline_id = 1, .num_replicas_in_sync = 2};
  Dataset ds = fashion_mnist(kFashionMnistDirectory, Split::kTest)
                   .shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
                   .shuffle(10'000, /*seed=*/42)
                   .repeat()
                   .batch(ctx.per_replica_batch_size(256))
                   .prefetch(2);
  Iterator it = ds.make_iterator();
  std::vector<int64_t> counts(10, 0);
  for (int b = 0; b < 50; ++b) {  // 6400 examples: more than the 5000 of this shard
    auto batch = it.next();
    ASSERT_TRUE(batch);
    EXPECT_EQ(batch->features.at("image").shape(), (Shape{128, 784}));
    for (int64_t label : batch->labels.to_vector<int64_t>()) {
      ASSERT_GE(label, 0);
      ASSERT_LE(label, 9);
      ++counts[label];
    }
  }
  for (int64_t c : counts) EXPECT_GT(c, 400);  // shuffled across classes
}

TEST(MnistDatasetTest, MissingDirectoryIsNotFoundNamingTheFile) {
  try {
    fashion_mnist("/nonexistent/fmnist", Split::kTrain);
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/fmnist/train-images-idx3-ubyte.gz"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cadre::io
