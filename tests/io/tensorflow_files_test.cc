// Files shared with TensorFlow and TensorBoard, both ways:
//  - tests/io/testdata/tf_examples.tfrecord was written by TensorFlow itself
//    (tools/compat/make_tf_examples.py); Cadre must read every value of it and frame and
//    serialize the same records to the same bytes.
//  - Cadre writes a TFRecord file of Examples and an event file here; with CADRE_COMPAT_DIR
//    set they are kept there for tools/compat/check_tf_reads_cadre.py, which reads them
//    with TensorFlow and TensorBoard (see tools/compat/README.md). The values written are
//    spelled out in that script too: change both together.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "cadre/io/event_file.h"
#include "cadre/io/example.h"
#include "cadre/io/summary_writer.h"
#include "cadre/io/tfrecord.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// What make_tf_examples.py put in the golden file; an empty `varlen` with `has_varlen`
// false is a feature absent from the record.
struct GoldenRecord {
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string name;
  std::vector<int64_t> varlen;
  bool has_varlen = true;
};

const std::vector<GoldenRecord>& golden_records() {
  static const std::vector<GoldenRecord> records = {
      {{1, -2, 300}, {0.5f, -1.25f}, "alpha", {7, 8, 9}},
      {{0, int64_t{1} << 40, kInt64Min}, {3.140625f, 1e-3f}, "", {}},
      {{kInt64Max, 42, -1},
       {-0.0f, 65504.0f},
       std::string("\0\xff"
                   "bin",
                   5),
       {},
       false},
  };
  return records;
}

FeatureSpec golden_spec() {
  return {
      {"ints", FixedLenFeature{FeatureType::kInt64, Shape{3}}},
      {"floats", FixedLenFeature{FeatureType::kFloat, Shape{2}}},
      {"name", FixedLenFeature{FeatureType::kBytes, Shape{}}},
      {"varlen", VarLenFeature{FeatureType::kInt64}},
  };
}

std::string golden_path() { return std::string(CADRE_IO_TESTDATA) + "/tf_examples.tfrecord"; }

std::vector<std::string> read_all_records(const std::string& path) {
  TFRecordReader reader(path);
  std::vector<std::string> records;
  while (std::optional<std::string> record = reader.read()) records.push_back(*record);
  return records;
}

class TensorFlowFilesTest : public cadre::testing::TempDirTest {};

TEST_F(TensorFlowFilesTest, ReadsEveryValueOfExamplesTensorFlowWrote) {
  std::vector<std::string> records = read_all_records(golden_path());
  const auto& golden = golden_records();
  ASSERT_EQ(records.size(), golden.size());
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    const GoldenRecord& want = golden[i];
    Features f = parse_example(records[i], golden_spec());
    EXPECT_EQ(f.at("ints").dtype(), DType::kInt64);
    EXPECT_EQ(f.at("ints").shape(), (Shape{3}));
    EXPECT_EQ(f.at("ints").to_vector<int64_t>(), want.ints);
    EXPECT_EQ(f.at("floats").dtype(), DType::kFloat32);
    std::vector<float> floats = f.at("floats").to_vector<float>();
    ASSERT_EQ(floats.size(), want.floats.size());
    for (size_t j = 0; j < floats.size(); ++j) {
      // Bit for bit: -0.0 keeps its sign.
      EXPECT_EQ(floats[j], want.floats[j]) << j;
      EXPECT_EQ(std::signbit(floats[j]), std::signbit(want.floats[j])) << j;
    }
    EXPECT_EQ(f.at("name").dtype(), DType::kUInt8);
    EXPECT_EQ(tensor_bytes(f.at("name")), want.name);
    EXPECT_EQ(f.at("varlen").shape(), (Shape{static_cast<int64_t>(want.varlen.size())}));
    EXPECT_EQ(f.at("varlen").to_vector<int64_t>(), want.varlen);
  }
}

TEST_F(TensorFlowFilesTest, WritesTheSameBytesAsTensorFlow) {
  std::string file = read_file(golden_path());
  std::vector<std::string> records = read_all_records(golden_path());
  std::string framed;
  for (const std::string& record : records) framed += frame_record(record);
  EXPECT_EQ(framed, file) << "TFRecord framing (lengths, masked CRC-32C) differs";
  // TensorFlow serialized with deterministic=True: map entries in key order, as Cadre does.
  const auto& golden = golden_records();
  ASSERT_EQ(records.size(), golden.size());
  for (size_t i = 0; i < golden.size(); ++i) {
    ExampleBuilder builder;
    builder.add_int64s("ints", golden[i].ints)
        .add_floats("floats", golden[i].floats)
        .add_bytes("name", {golden[i].name});
    if (golden[i].has_varlen) builder.add_int64s("varlen", golden[i].varlen);
    EXPECT_EQ(builder.serialize(), records[i]) << "record " << i;
  }
}

TEST_F(TensorFlowFilesTest, ReadsTheGoldenFileThroughADatasetPipeline) {
  Iterator it =
      tfrecord_dataset({golden_path()}).map(example_parser(golden_spec())).make_iterator();
  size_t count = 0;
  while (std::optional<Element> element = it.next()) {
    ASSERT_LT(count, golden_records().size());
    EXPECT_EQ(element->features.at("ints").to_vector<int64_t>(), golden_records()[count].ints);
    ++count;
  }
  EXPECT_EQ(count, golden_records().size());
}

// --- Files for TensorFlow and TensorBoard to read (tools/compat/check_tf_reads_cadre.py) ---

// The directory to leave the files in: $CADRE_COMPAT_DIR when set, else the test's own.
std::filesystem::path output_dir(const std::filesystem::path& temporary) {
  const char* keep = std::getenv("CADRE_COMPAT_DIR");
  if (keep == nullptr || *keep == '\0') return temporary;
  std::filesystem::create_directories(keep);
  return keep;
}

// Record r of cadre_examples.tfrecord (r = 0..3).
ExampleBuilder cadre_example(int64_t r) {
  ExampleBuilder builder;
  builder.add_int64s("ints", {r, -1000 * r - 1, int64_t{1} << (40 + r)});
  builder.add_floats("floats", {static_cast<float>(r) + 0.25f, -0.5f * static_cast<float>(r)});
  builder.add_bytes(
      "name", {r == 2 ? std::string() : "cadre " + std::to_string(r) + std::string("\0\xff", 2)});
  if (r < 3) {  // r = 0: present and empty; r = 3: absent
    std::vector<int64_t> varlen;
    for (int64_t j = 0; j < r; ++j) varlen.push_back(10 * r + j);
    builder.add_int64s("varlen", varlen);
  }
  return builder;
}

TEST_F(TensorFlowFilesTest, WritesExamplesForTensorFlow) {
  std::string path = (output_dir(dir()) / "cadre_examples.tfrecord").string();
  {
    TFRecordWriter writer(path);
    for (int64_t r = 0; r < 4; ++r) writer.write(cadre_example(r).serialize());
    writer.close();
  }
  std::vector<std::string> records = read_all_records(path);
  ASSERT_EQ(records.size(), 4u);
  Features last = parse_example(records[3], golden_spec());
  EXPECT_EQ(last.at("ints").to_vector<int64_t>(),
            (std::vector<int64_t>{3, -3001, int64_t{1} << 43}));
  EXPECT_EQ(last.at("varlen").numel(), 0);
  EXPECT_EQ(parse_example(records[2], golden_spec()).at("varlen").to_vector<int64_t>(),
            (std::vector<int64_t>{20, 21}));
}

TEST_F(TensorFlowFilesTest, WritesSummariesForTensorBoard) {
  std::filesystem::path logdir = output_dir(dir()) / "events";
  std::filesystem::remove_all(logdir);  // one event file only, this run's
  std::string file;
  {
    SummaryWriter writer(logdir.string());
    file = writer.path();
    for (int64_t k = 0; k < 5; ++k) writer.scalar("loss", 1.0 / (k + 1), 100 * k);
    writer.scalar("accuracy", 0.875, 400);
    writer.histogram("weights", Tensor::from_vector<float>({-1, 0, 0.5f, 2, 2}), 400);
    std::vector<double> activations;
    for (int i = 0; i < 1000; ++i) activations.push_back(i * 0.01 - 3);
    writer.histogram("activations", activations, 500);
    writer.text("notes", "**hello** from step 400", 400);
  }
  std::vector<Event> events = read_event_file(file);
  ASSERT_EQ(events.size(), 1u + 5 + 1 + 2 + 1);
  EXPECT_EQ(events.back().values.at(0).tag, "notes");
}

}  // namespace
}  // namespace cadre::io
