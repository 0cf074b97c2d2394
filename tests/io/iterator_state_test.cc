// Saving an iterator mid-stream and restoring the state into a fresh iterator of a rebuilt
// pipeline continues with exactly the elements the original would have produced.
#include <gtest/gtest.h>

#include <functional>

#include "cadre/base/errors.h"
#include "cadre/io/csv.h"
#include "cadre/io/dataset.h"
#include "cadre/io/tfrecord.h"
#include "cadre/ops/math.h"
#include "tests/io/dataset_helpers.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using test_helpers::drain;

// Copies every tensor, as a checkpoint round trip would.
IteratorState deep_copy(const IteratorState& state) {
  IteratorState out;
  for (const auto& [key, tensor] : state) out[key] = tensor.clone();
  return out;
}

// Takes `consumed` elements, saves, and checks that a restored iterator of a pipeline built
// anew yields what the original yields next (up to `limit` elements).
void expect_exact_resume(const std::function<Dataset()>& make, size_t consumed,
                         size_t limit = 400) {
  SCOPED_TRACE(::testing::Message() << "resuming after " << consumed << " elements");
  Iterator original = make().make_iterator();
  std::vector<std::string> before = drain(original, consumed);
  ASSERT_EQ(before.size(), consumed) << "the pipeline ended early";
  IteratorState state = deep_copy(original.save());
  std::vector<std::string> expected = drain(original, limit);

  Iterator resumed = make().make_iterator();
  resumed.restore(state);
  std::vector<std::string> got = drain(resumed, limit);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the restored iterator yields other elements";
}

Dataset::MapFn plus_one() {
  return [](Element e) { return Element(e.value() + 1.0); };
}

TEST(IteratorStateTest, ShufflePrefetchAndParallelMapResumeExactly) {
  auto make = [] {
    return Dataset::range(60)
        .map(plus_one(), 3)
        .shuffle(16, /*seed=*/5)
        .repeat(3)
        .batch(4)
        .prefetch(3);
  };
  for (size_t consumed : {0, 1, 7, 15, 16, 30}) expect_exact_resume(make, consumed);
}

TEST(IteratorStateTest, FeaturesAndLabelsPipelineResumesMidEpoch) {
  std::vector<float> pixels(100 * 3);
  std::vector<int64_t> classes(100);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 7;
  for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(i % 10);
  Tensor images = Tensor::from_vector(pixels, {100, 3});
  Tensor labels = Tensor::from_vector(classes);
  auto make = [&] {
    return Dataset::from_tensor_slices(Features{{"image", images}}, labels)
        .shard(2, 1)
        .shuffle(20, 42)
        .repeat()
        .batch(8)
        .prefetch(2);
  };
  expect_exact_resume(make, 3, 30);   // inside the first epoch (50 elements)
  expect_exact_resume(make, 11, 30);  // inside the second
}

TEST(IteratorStateTest, EveryTransformationResumes) {
  auto var = [](Element e) {
    int64_t n = e.value().item<int64_t>() % 4 + 1;
    return Element(Features{{"v", Tensor::full({n}, 1.0)}}, e.value());
  };
  std::vector<std::pair<const char*, std::function<Dataset()>>> pipelines = {
      {"take_skip_filter",
       [] {
         return Dataset::range(100)
             .skip(5)
             .filter([](const Element& e) { return e.value().item<int64_t>() % 3 != 0; })
             .take(50);
       }},
      {"unbatch", [] { return Dataset::range(40).batch(7).unbatch(); }},
      {"padded_batch", [&] { return Dataset::range(40).map(var).padded_batch(3); }},
      {"interleave",
       [] {
         return Dataset::range(6).interleave(
             [](const Element& e) {
               int64_t x = e.value().item<int64_t>();
               return Dataset::range(100 * x, 100 * x + x + 2).shuffle(3, x);
             },
             3, 2);
       }},
      {"zip_enumerate_concatenate",
       [] {
         Dataset labels = Dataset::range(50).map([](Element e) { return Element({}, e.value()); });
         return Dataset::zip({Dataset::range(100, 140), labels})
             .enumerate()
             .concatenate(Dataset::zip({Dataset::range(5), labels}).enumerate());
       }},
      {"memory_cache", [] { return Dataset::range(10).cache().shuffle(4, 1).repeat(3); }},
      {"generator",
       [] {
         return Dataset::from_generator([i = int64_t{0}]() mutable -> std::optional<Element> {
           if (i == 30) return std::nullopt;
           int64_t square = i * i;
           ++i;
           return Element(Tensor::scalar<int64_t>(square));
         });
       }},
      {"parallel_map_prefetch", [] { return Dataset::range(20).map(plus_one(), 2).prefetch(2); }},
  };
  for (const auto& [name, make] : pipelines) {
    SCOPED_TRACE(name);
    for (size_t consumed : {1, 4, 9}) expect_exact_resume(make, consumed);
  }
}

TEST(IteratorStateTest, StateOfAnotherPipelineIsRejected) {
  Iterator a = Dataset::range(10).shuffle(3).make_iterator();
  a.next();
  IteratorState state = a.save();
  Iterator b = Dataset::range(10).batch(2).make_iterator();
  try {
    b.restore(state);
    FAIL() << "restored a shuffle's state into a batch";
  } catch (const InvalidArgumentError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'shuffle'"), std::string::npos) << m;
    EXPECT_NE(m.find("'batch'"), std::string::npos) << m;
  }
  EXPECT_THROW(b.restore(IteratorState{}), InvalidArgumentError);
}

TEST(IteratorStateTest, StateIsAFewNamedTensors) {
  Iterator it = Dataset::range(1000).shuffle(100, 1).batch(10).prefetch(2).make_iterator();
  it.next();
  IteratorState state = it.save();
  EXPECT_LE(state.size(), 16u);
  EXPECT_EQ(tensor_bytes(state.at("kind")), "prefetch");
  EXPECT_EQ(tensor_bytes(state.at("input/input/kind")), "shuffle");
  // The range is past the shuffle buffer and the batches made so far: the one returned and
  // up to two prefetched.
  int64_t range_position = state.at("input/input/input/value").item<int64_t>();
  EXPECT_GE(range_position, 100 + 10 - 1);
  EXPECT_LE(range_position, 100 + 30 - 1);
}

class FileStateTest : public cadre::testing::TempDirTest {};

TEST_F(FileStateTest, FileReadersResumeAtTheirByteOffset) {
  std::vector<std::string> files;
  for (int f = 0; f < 3; ++f) {
    files.push_back(path("part" + std::to_string(f) + ".tfrecord"));
    TFRecordWriter writer(files.back());
    for (int r = 0; r < 10 + f; ++r)
      writer.write("file " + std::to_string(f) + " record " + std::to_string(r));
    writer.close();
  }
  std::string csv = write_file("data.csv", "a,b\n1,x\n2,\"y,\"\"z\"\"\"\n\n3,w\n4,v\n5,u\n");
  auto tfrecords = [&] { return tfrecord_dataset(files).prefetch(2); };
  auto interleaved = [&] {
    return Dataset::from_strings(files).interleave(
        [](const Element& f) { return tfrecord_dataset({tensor_bytes(f.value())}); }, 2);
  };
  auto csv_rows = [&] {
    CsvOptions options;
    options.columns = {{"b", CsvType::kString}, {"a", CsvType::kInt64}};
    options.label_column = "a";
    return csv_dataset({csv, csv}, options);
  };
  for (size_t consumed : {1, 9, 12, 20}) expect_exact_resume(tfrecords, consumed);
  for (size_t consumed : {1, 5, 13}) expect_exact_resume(interleaved, consumed);
  for (size_t consumed : {1, 2, 5, 6}) expect_exact_resume(csv_rows, consumed);
}

TEST_F(FileStateTest, FileCacheResumesWhileWritingAndReading) {
  std::string file = path("cache");
  auto make = [&] { return Dataset::range(12).cache(file).repeat(2); };
  IteratorState state;
  {
    // The first pass stops (as a process would die) after writing 7 records.
    Iterator writer = make().make_iterator();
    drain(writer, 5);
    state = deep_copy(writer.save());
    drain(writer, 2);
  }
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_TRUE(std::filesystem::exists(file + ".partial"));
  Iterator resumed = make().make_iterator();
  resumed.restore(state);  // continues writing the partial file from record 5
  std::vector<int64_t> values;
  while (auto e = resumed.next()) values.push_back(e->value().item<int64_t>());
  std::vector<int64_t> expected = {5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_EQ(values, expected);
  EXPECT_TRUE(std::filesystem::exists(file));
  expect_exact_resume(make, 5);  // reading the finished cache in both passes
  expect_exact_resume(make, 17);
}

}  // namespace
}  // namespace cadre::io
