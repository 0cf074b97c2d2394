// tf.train.Example: serialized bytes against the protobuf wire format worked out by hand,
// and parsing by a feature spec.
#include "cadre/io/example.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "cadre/io/tfrecord.h"
#include "tests/support/bytes.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using cadre::testing::bytes;

// Example{features{feature{"a": int64 [1, 300]}, {"b": float [1.5]}, {"c": bytes ["hi"]}}}.
// Tags are (field << 3) | wire type, with wire type 2 (length-delimited) throughout; map
// entries are messages {1: key, 2: value}, in key order.
const std::string kExample = bytes({
    0x0A, 0x2A,                          // Example.features (1), 42 bytes
    0x0A, 0x0C,                          //   Features.feature (1) entry, 12 bytes
    0x0A, 0x01, 'a',                     //     key "a"
    0x12, 0x07,                          //     value: Feature, 7 bytes
    0x1A, 0x05,                          //       int64_list (3), 5 bytes
    0x0A, 0x03, 0x01, 0xAC, 0x02,        //         packed value (1): varints 1 and 300
    0x0A, 0x0D,                          //   entry, 13 bytes
    0x0A, 0x01, 'b',                     //     key "b"
    0x12, 0x08,                          //     value: Feature, 8 bytes
    0x12, 0x06,                          //       float_list (2), 6 bytes
    0x0A, 0x04, 0x00, 0x00, 0xC0, 0x3F,  // packed value: 1.5f = 0x3FC00000 little-endian
    0x0A, 0x0B,                          //   entry, 11 bytes
    0x0A, 0x01, 'c',                     //     key "c"
    0x12, 0x06,                          //     value: Feature, 6 bytes
    0x0A, 0x04,                          //       bytes_list (1), 4 bytes
    0x0A, 0x02, 'h',  'i',               //         value (1): "hi"
});

TEST(ExampleTest, SerializesToTheWireBytesWorkedOutByHand) {
  ExampleBuilder builder;
  builder.add_bytes("c", {"hi"}).add_int64s("a", {1, 300}).add_floats("b", {1.5f});
  EXPECT_EQ(builder.serialize(), kExample);
}

TEST(ExampleTest, ParsesFixedAndVariableLengthFeatures) {
  FeatureSpec spec = {
      {"a", FixedLenFeature{FeatureType::kInt64, Shape{2}}},
      {"b", VarLenFeature{FeatureType::kFloat}},
      {"c", FixedLenFeature{FeatureType::kBytes, Shape{}}},
      {"d", FixedLenFeature{FeatureType::kFloat, Shape{}, Tensor::scalar<float>(-1.0f)}},
      {"e", VarLenFeature{FeatureType::kInt64}},
  };
  Features f = parse_example(kExample, spec);
  EXPECT_EQ(f.at("a").dtype(), DType::kInt64);
  EXPECT_EQ(f.at("a").to_vector<int64_t>(), (std::vector<int64_t>{1, 300}));
  EXPECT_EQ(f.at("b").shape(), (Shape{1}));
  EXPECT_EQ(f.at("b").item<float>(), 1.5f);
  EXPECT_EQ(tensor_bytes(f.at("c")), "hi");
  EXPECT_EQ(f.at("d").item<float>(), -1.0f);  // missing: the default
  EXPECT_EQ(f.at("e").shape(), (Shape{0}));   // missing variable-length: empty
  // A fixed shape reshapes the values.
  Features m = parse_example(ExampleBuilder().add_floats("m", {1, 2, 3, 4, 5, 6}).serialize(),
                             {{"m", FixedLenFeature{FeatureType::kFloat, Shape{2, 3}}}});
  EXPECT_EQ(m.at("m").shape(), (Shape{2, 3}));
}

// A variable-length bytes feature (tags, as tf.io.VarLenFeature(tf.string) reads them): the
// strings end to end with their lengths beside them, NUL bytes and empty strings kept.
TEST(ExampleTest, ParsesAListOfStringsWithTheirLengths) {
  const std::vector<std::string> tags = {"red", "", std::string("a\0b", 3), "blue"};
  FeatureSpec spec = {{"tags", VarLenFeature{FeatureType::kBytes}},
                      {"none", VarLenFeature{FeatureType::kBytes}}};
  Features f = parse_example(ExampleBuilder().add_bytes("tags", tags).serialize(), spec);
  EXPECT_EQ(f.at("tags").shape(), (Shape{10}));
  EXPECT_EQ(f.at(string_lengths_key("tags")).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 0, 3, 4}));
  EXPECT_EQ(string_list(f, "tags"), tags);
  EXPECT_EQ(f.at("none").shape(), (Shape{0}));  // missing: no strings
  EXPECT_TRUE(string_list(f, "none").empty());
  // One string (a FixedLenFeature's, CSV's) reads as a list of one.
  Features one{{"s", bytes_tensor("hi")}};
  EXPECT_EQ(string_list(one, "s"), std::vector<std::string>{"hi"});
  // Lengths that do not add up to the bytes are an error naming the feature.
  Features bad{{"t", bytes_tensor("abc")},
               {string_lengths_key("t"), Tensor::from_vector(std::vector<int64_t>{2, 2})}};
  EXPECT_THROW(
      {
        try {
          string_list(bad, "t");
        } catch (const InvalidArgumentError& e) {
          EXPECT_NE(std::string(e.what()).find("feature 't'"), std::string::npos) << e.what();
          throw;
        }
      },
      InvalidArgumentError);
}

std::string invalid_argument(const std::string& serialized, const FeatureSpec& spec) {
  try {
    parse_example(serialized, spec);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "no InvalidArgumentError";
}

TEST(ExampleTest, BadExamplesNameTheFeature) {
  std::string m = invalid_argument(kExample, {{"label", FixedLenFeature{FeatureType::kInt64, {}}}});
  EXPECT_NE(m.find("required feature 'label'"), std::string::npos) << m;
  m = invalid_argument(kExample, {{"a", FixedLenFeature{FeatureType::kFloat, Shape{2}}}});
  EXPECT_NE(m.find("'a' holds a int64 list where the spec expects float"), std::string::npos) << m;
  m = invalid_argument(kExample, {{"a", FixedLenFeature{FeatureType::kInt64, Shape{3}}}});
  EXPECT_NE(m.find("'a' has 2 int64 values"), std::string::npos) << m;
  m = invalid_argument("\x0A\x05garbage", {});
  EXPECT_NE(m.find("tf.train.Example"), std::string::npos) << m;
}

class ExampleFileTest : public cadre::testing::TempDirTest {};

TEST_F(ExampleFileTest, ParserMapsTFRecordsToFeaturesAndLabels) {
  std::string file = path("examples.tfrecord");
  {
    TFRecordWriter writer(file);
    for (int64_t i = 0; i < 5; ++i) {
      std::vector<int64_t> tokens(static_cast<size_t>(i), i);
      writer.write(ExampleBuilder()
                       .add_floats("x", {float(i), float(2 * i)})
                       .add_int64s("tokens", tokens)
                       .add_int64s("label", {i % 2})
                       .serialize());
    }
  }
  FeatureSpec spec = {{"x", FixedLenFeature{FeatureType::kFloat, Shape{2}}},
                      {"tokens", VarLenFeature{FeatureType::kInt64}},
                      {"label", FixedLenFeature{FeatureType::kInt64, {}}}};
  Iterator it =
      tfrecord_dataset({file}).map(example_parser(spec, "label")).padded_batch(5).make_iterator();
  auto batch = it.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->features.names(), (std::vector<std::string>{"tokens", "x"}));
  EXPECT_EQ(batch->features.at("x").shape(), (Shape{5, 2}));
  EXPECT_EQ(batch->features.at("tokens").shape(), (Shape{5, 4}));
  EXPECT_EQ(batch->features.at("tokens").to_vector<int64_t>()[3 * 4 + 2], 3);
  EXPECT_EQ(batch->labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 0}));
  EXPECT_THROW(example_parser(spec, "missing"), InvalidArgumentError);
}

TEST(ExampleTest, DecodeRawReadsLittleEndianElements) {
  float values[2] = {1.5f, -2.0f};
  Tensor raw = bytes_tensor(std::string_view(reinterpret_cast<const char*>(values), 8));
  EXPECT_EQ(decode_raw(raw, DType::kFloat32).to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_THROW(decode_raw(bytes_tensor("abc"), DType::kInt32), InvalidArgumentError);
}

}  // namespace
}  // namespace cadre::io
