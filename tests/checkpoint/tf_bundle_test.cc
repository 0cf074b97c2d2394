// TensorFlow's checkpoint format: a bundle TensorFlow 2.15 wrote is read as TensorFlow wrote
// it, bundles Cadre writes read back, and damage (a flipped byte in the index or the data, a
// truncated file) is a DataLossError naming the file.
#include "checkpoint/tf_bundle.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "checkpoint/tf_table.h"
#include "tests/checkpoint/test_util.h"

namespace cadre::checkpoint {
namespace {

using internal::TableEntries;
using testing::flip_byte;
using testing::TempDir;

std::string from_hex(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return bytes;
}

// tf.compat.v1.train.Saver().save(session, "model.ckpt", global_step=42) in TensorFlow 2.15.1
// with variables dnn/hiddenlayer_0/kernel = arange(6).reshape(2, 3) (float32),
// dnn/logits/bias = [1.5, -2.0] (float64) and global_step = 42 (int64).
constexpr std::string_view kTfIndex =
    "00000608011a020801001813646e6e2f68696464656e6c617965725f302f6b65726e656c0801120812020802"
    "12020803281835c0db3d17040b116c6f676974732f6269617308021204120208022018281035ecd0e2bd000b"
    "0d676c6f62616c5f73746570080912002028280835ae8d91f500000000010000000067a6ef87000000000100"
    "000000c0f2a1b00001026800790000000001000000000f3612047e088b010e00000000000000000000000000"
    "0000000000000000000000000000000000000000000057fb808b247547db";
constexpr std::string_view kTfData =
    "000000000000803f0000004000004040000080400000a040000000000000f83f00000000000000c02a000000"
    "00000000";

class TfBundleTest : public ::testing::Test {
 protected:
  std::string tensorflow_bundle() {
    std::string prefix = dir.path() + "/model.ckpt-42";
    env->write_file(prefix + ".index", from_hex(kTfIndex));
    env->write_file(prefix + ".data-00000-of-00001", from_hex(kTfData));
    return prefix;
  }

  TempDir dir;
  std::shared_ptr<Env> env = posix_env();
};

TEST_F(TfBundleTest, ReadsWhatTensorFlowWrote) {
  auto reader = CheckpointReader::open(tensorflow_bundle());
  EXPECT_EQ(reader->global_step(), 42);
  ASSERT_EQ(reader->variables().size(), 2u);
  Tensor kernel = reader->read("dnn/hiddenlayer_0/kernel");
  EXPECT_EQ(kernel.shape(), Shape({2, 3}));
  EXPECT_EQ(kernel.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  Tensor bias = reader->read("dnn/logits/bias");
  EXPECT_EQ(bias.dtype(), DType::kFloat64);
  EXPECT_EQ(bias.to_vector<double>(), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(reader->variables().count("global_step"), 0u);  // it is global_step()
  EXPECT_TRUE(reader->verify().empty());
  // The index file's own name opens it too.
  EXPECT_EQ(CheckpointReader::open(tensorflow_bundle() + ".index")->global_step(), 42);
}

TEST_F(TfBundleTest, WhatCadreWritesReadsBackByteForByte) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"linear/linear_model/age/weights", Tensor::from_vector(std::vector<float>{0.25f, -1})},
      {"global_step", Tensor::from_vector(std::vector<int64_t>{7}).reshape({})},
      {"dnn/hiddenlayer_0/kernel",
       Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}).reshape({3, 2})},
      {"flags", Tensor::from_vector(std::vector<int32_t>{1, 0, 1})},
      {"empty", Tensor::empty({0, 4})}};
  const std::string prefix = dir.path() + "/converted";
  internal::write_tf_bundle(*env, prefix, tensors);
  auto reader = CheckpointReader::open(prefix);
  EXPECT_EQ(reader->global_step(), 7);
  ASSERT_EQ(reader->variables().size(), tensors.size() - 1);
  for (const auto& [name, tensor] : tensors) {
    if (name != "global_step") testing::expect_equal_tensors(tensor, reader->read(name), name);
  }
  // Rows of a variable, as a partitioned variable restores them.
  Tensor rows = Tensor::empty({2, 2}, DType::kFloat64);
  reader->read_rows_into("dnn/hiddenlayer_0/kernel", 1, rows);
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{3, 4, 5, 6}));
  EXPECT_THROW(internal::write_tf_bundle(*env, prefix,
                                         {{"a", Tensor::empty({1})}, {"a", Tensor::empty({1})}}),
               InvalidArgumentError);
}

TEST_F(TfBundleTest, ADamagedDataFileIsDataLossNamingTheFileAndTheTensor) {
  const std::string prefix = tensorflow_bundle();
  flip_byte(prefix + ".data-00000-of-00001", 30);  // inside dnn/logits/bias
  auto reader = CheckpointReader::open(prefix);
  reader->read("dnn/hiddenlayer_0/kernel");
  try {
    reader->read("dnn/logits/bias");
    FAIL() << "a flipped byte was read";
  } catch (const DataLossError& error) {
    EXPECT_NE(std::string(error.what()).find("model.ckpt-42.data-00000-of-00001"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("dnn/logits/bias"), std::string::npos);
  }
  std::vector<DatasetProblem> problems = reader->verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].dataset, "dnn/logits/bias");
  // A data file cut short.
  std::filesystem::resize_file(prefix + ".data-00000-of-00001", 20);
  EXPECT_THROW(CheckpointReader::open(prefix)->read("dnn/hiddenlayer_0/kernel"), DataLossError);
}

TEST_F(TfBundleTest, EveryDamagedByteOfTheIndexIsDataLossNamingIt) {
  const std::string index = from_hex(kTfIndex);
  for (size_t offset = 0; offset < index.size(); ++offset) {
    std::string damaged = index;
    damaged[offset] ^= 0x10;
    const std::string prefix = tensorflow_bundle();
    env->write_file(prefix + ".index", damaged);
    try {
      CheckpointReader::open(prefix);
      // Only the footer's padding is outside every checksum.
      EXPECT_TRUE(offset >= index.size() - 43 && offset < index.size() - 8) << offset;
    } catch (const DataLossError& error) {
      EXPECT_NE(std::string(error.what()).find("model.ckpt-42.index"), std::string::npos)
          << error.what();
    }
  }
  const std::string prefix = tensorflow_bundle();
  env->write_file(prefix + ".index", index.substr(0, 100));
  EXPECT_THROW(CheckpointReader::open(prefix), DataLossError);
}

TEST(TfTableTest, ManyEntriesAcrossBlocksRoundTrip) {
  TableEntries entries;
  for (int i = 0; i < 500; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "layer_%03d/kernel", i);
    entries.emplace_back(key, std::string(static_cast<size_t>(i % 7), static_cast<char>(i)));
  }
  std::string table = internal::build_table(entries, /*block_bytes=*/256);
  EXPECT_EQ(internal::read_table(table, "t"), entries);
  EXPECT_THROW(internal::build_table({{"b", ""}, {"a", ""}}), InvalidArgumentError);
  EXPECT_EQ(internal::read_table(internal::build_table({}), "t"), TableEntries{});
}

}  // namespace
}  // namespace cadre::checkpoint
