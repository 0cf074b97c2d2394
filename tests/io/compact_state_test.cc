// Iterator state that holds where buffered elements came from (their origins) instead of
// the elements: a few bytes per element, and a restored iterator that fetches them again
// yields exactly what an uninterrupted one yields (stages over rows of an in-memory source:
// compact_state_rows_test.cc).
#include "tests/io/compact_state_test.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/io/csv.h"
#include "cadre/io/dataset.h"
#include "cadre/io/mnist.h"
#include "cadre/io/tfrecord.h"
#include "cadre/ops/array.h"
#include "tests/io/dataset_helpers.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using test_helpers::drain;

using test_helpers::deep_copy;
using test_helpers::element_entries;
using test_helpers::expect_compact_exact_resume;

// A map whose output depends on its input only, as map functions must.
Dataset::MapFn scale_and_tag() {
  return [](Element e) {
    Element out;
    for (const auto& [name, t] : e.features) out.features.set(name, t);
    out.features.set("tag", Tensor::scalar<int64_t>(static_cast<int64_t>(e.features.size())));
    out.labels = e.labels;
    return out;
  };
}

// The pipeline every source goes through: map (parallel), shuffle that reshuffles per
// pass, repeat, batch (padded for byte strings of varying length) and prefetch, so that
// state is held by parallel map slots, the shuffle buffer and prefetched batches at once.
Dataset standard_pipeline(const Dataset& source, bool pad = false) {
  Dataset shuffled = source.map(scale_and_tag(), 2).shuffle(64, 7).repeat(3);
  return (pad ? shuffled.padded_batch(5) : shuffled.batch(5)).prefetch(3);
}

TEST(CompactStateTest, InMemorySourcesSaveOriginsAndResumeExactly) {
  std::vector<float> pixels(300 * 4);
  std::vector<int64_t> classes(300);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 3;
  for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(i % 10);
  Tensor images = Tensor::from_vector(pixels, {300, 4});
  Tensor labels = Tensor::from_vector(classes);
  auto slices = [&] {
    return standard_pipeline(Dataset::from_tensor_slices(Features{{"x", images}}, labels));
  };
  auto range = [] { return standard_pipeline(Dataset::range(500, 0, -3)); };
  std::vector<std::string> names;
  for (int i = 0; i < 200; ++i) names.push_back("name " + std::to_string(i));
  auto strings = [&] { return standard_pipeline(Dataset::from_strings(names), true); };
  for (size_t consumed : {0, 1, 13, 40, 70}) {
    // 64 buffered origins and 3 x 5 prefetched ones, about 2 bytes each, plus counters.
    expect_compact_exact_resume(slices, consumed, 2000);
    expect_compact_exact_resume(range, consumed, 2000);
    expect_compact_exact_resume(strings, consumed, 2000);
  }
}

TEST(CompactStateTest, FashionMnistSavesOriginsAndResumesExactly) {
  if (!std::filesystem::exists(std::string(kFashionMnistDirectory) +
                               "/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  Dataset source = fashion_mnist(kFashionMnistDirectory, Split::kTest);
  auto make = [&] { return source.shuffle(10000, 42).repeat().batch(256).prefetch(2); };
  // The shuffle as the rows it drew and two batches as origins: ~2 KB where the images take
  // 31 MB (the buffer's 10,000 rows as origins took 30 KB).
  for (size_t consumed : {1, 39, 45}) expect_compact_exact_resume(make, consumed, 2500, 8);
}

class CompactFileStateTest : public cadre::testing::TempDirTest {
 protected:
  std::vector<std::string> write_tfrecords() {
    std::vector<std::string> files;
    for (int f = 0; f < 3; ++f) {
      files.push_back(path("part" + std::to_string(f) + ".tfrecord"));
      TFRecordWriter writer(files.back());
      for (int r = 0; r < 40 + 7 * f; ++r) {
        writer.write("file " + std::to_string(f) + " record " + std::to_string(r));
      }
      writer.close();
    }
    return files;
  }
};

TEST_F(CompactFileStateTest, FileSourcesAndInterleaveSaveOriginsAndResumeExactly) {
  std::vector<std::string> files = write_tfrecords();
  std::string csv_text = "a,b\n";
  for (int i = 0; i < 150; ++i) {
    csv_text += std::to_string(i) + ",\"row " + std::to_string(i) + (i % 7 == 0 ? "\n" : "") +
                "\"\n" + (i % 11 == 0 ? "\n" : "");
  }
  std::string csv = write_file("data.csv", csv_text);
  auto tfrecords = [&] { return standard_pipeline(tfrecord_dataset(files), true); };
  auto interleaved = [&] {
    Dataset per_file =
        Dataset::list_files(path("part*.tfrecord"))
            .interleave(
                [](const Element& f) { return tfrecord_dataset({tensor_bytes(f.value())}); }, 2, 3);
    return standard_pipeline(per_file, true);
  };
  auto csv_rows = [&] {
    CsvOptions options;
    options.columns = {{"b", CsvType::kString}, {"a", CsvType::kInt64}};
    options.label_column = "a";
    return standard_pipeline(csv_dataset({csv, csv}, options), true);
  };
  for (size_t consumed : {0, 1, 17, 40}) {
    expect_compact_exact_resume(tfrecords, consumed, 3000);
    expect_compact_exact_resume(interleaved, consumed, 4000);
    expect_compact_exact_resume(csv_rows, consumed, 4000);
  }
}

TEST_F(CompactFileStateTest, AFileChangedSinceTheSaveIsDataLossNamingIt) {
  std::vector<std::string> files = write_tfrecords();
  auto make = [&] { return tfrecord_dataset(files).shuffle(30, 1); };
  Iterator it = make().make_iterator();
  it.next();
  IteratorState state = deep_copy(it.save());
  std::filesystem::resize_file(files[0], 20);  // the buffered records are gone
  Iterator resumed = make().make_iterator();
  try {
    resumed.restore(state);
    FAIL() << "restored records from a truncated file";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find(files[0]), std::string::npos) << e.what();
  }
}

// Iterator::prepare_save lets the prefetch thread record its input's position in the
// background; the consumer then takes up to a few more elements and saves. Within what was
// prefetched the recorded position is used, beyond it save() pauses the thread as without
// prepare_save: both must resume exactly.
TEST(CompactStateTest, APositionRecordedInTheBackgroundResumesExactly) {
  auto make = [] {
    return Dataset::range(400).shuffle(50, 3).repeat(2).batch(4).map(scale_and_tag()).prefetch(3);
  };
  for (size_t taken_after : {0, 1, 2, 3, 6}) {
    SCOPED_TRACE(::testing::Message() << taken_after << " elements after prepare_save");
    Iterator original = make().make_iterator();
    drain(original, 5);
    original.prepare_save();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread records it
    drain(original, taken_after);
    IteratorState state = deep_copy(original.save());
    EXPECT_EQ(element_entries(state), std::vector<std::string>{});
    std::vector<std::string> expected = drain(original, 300);
    Iterator resumed = make().make_iterator();
    resumed.restore(state);
    EXPECT_EQ(drain(resumed, 300), expected);
  }
  // Prefetched batches whose origins differ in length (the last batch is short): saved
  // with a length per origin, from the bytes the prefetch thread encoded.
  auto ragged = [] { return Dataset::range(10).batch(3).map(scale_and_tag()).prefetch(4); };
  Iterator original = ragged().make_iterator();
  drain(original, 1);
  original.prepare_save();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  IteratorState state = deep_copy(original.save());
  EXPECT_EQ(element_entries(state), std::vector<std::string>{});
  std::vector<std::string> expected = drain(original, 10);
  ASSERT_EQ(expected.size(), 3u);
  Iterator resumed = ragged().make_iterator();
  resumed.restore(state);
  EXPECT_EQ(drain(resumed, 10), expected);
}

// From the second save on, the prefetch thread records the position under the keys the
// save before put it (where the stage sits in the pipeline), and the save moves it in
// instead of copying it: with the prefetch stage at the root and inside the pipeline, every
// save of a run names the same entries and resumes exactly.
TEST(CompactStateTest, RepeatedSavesOfARecordedPositionResumeExactly) {
  std::vector<std::function<Dataset()>> pipelines{
      [] { return Dataset::range(400).shuffle(50, 3).batch(4).prefetch(3); },
      [] { return Dataset::range(400).shuffle(50, 3).batch(4).prefetch(3).map(scale_and_tag()); },
  };
  for (size_t p = 0; p < pipelines.size(); ++p) {
    SCOPED_TRACE(::testing::Message() << "pipeline " << p);
    Iterator original = pipelines[p]().make_iterator();
    std::vector<std::string> keys;
    for (int save = 0; save < 3; ++save) {
      SCOPED_TRACE(::testing::Message() << "save " << save);
      drain(original, 4);
      original.prepare_save();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread records it
      drain(original, 1);
      IteratorState state = deep_copy(original.save());
      std::vector<std::string> names;
      for (const auto& [key, value] : state) names.push_back(key);
      if (save == 0) keys = names;
      EXPECT_EQ(names, keys);
      std::vector<std::string> expected = drain(original, 6);  // the original goes on
      Iterator resumed = pipelines[p]().make_iterator();
      resumed.restore(state);
      EXPECT_EQ(drain(resumed, 6), expected);
    }
  }
}

TEST(CompactStateTest, StagesThatCannotFetchKeepTheirElements) {
  // enumerate numbers elements by position, which their origin does not say.
  auto make = [] { return Dataset::range(50).enumerate().shuffle(8, 3).batch(2).prefetch(2); };
  Iterator it = make().make_iterator();
  drain(it, 3);
  IteratorState state = deep_copy(it.save());
  EXPECT_FALSE(element_entries(state).empty());
  std::vector<std::string> expected = drain(it, 100);
  Iterator resumed = make().make_iterator();
  resumed.restore(state);
  EXPECT_EQ(drain(resumed, 100), expected);
}

}  // namespace
}  // namespace cadre::io
