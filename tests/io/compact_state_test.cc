// Iterator state that holds where buffered elements came from (their origins) instead of
// the elements: a few bytes per element, and a restored iterator that fetches them again
// yields exactly what an uninterrupted one yields.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
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

using testing::drain;

size_t state_bytes(const IteratorState& state) {
  size_t bytes = 0;
  for (const auto& [key, tensor] : state) bytes += key.size() + tensor.nbytes();
  return bytes;
}

// Keys of entries that hold whole encoded elements (buffers saved the old way).
std::vector<std::string> element_entries(const IteratorState& state) {
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : state) {
    for (const char* suffix : {"buffer", "results", "written"}) {
      if (key.size() >= std::strlen(suffix) &&
          key.compare(key.size() - std::strlen(suffix), std::string::npos, suffix) == 0) {
        keys.push_back(key);
      }
    }
  }
  return keys;
}

IteratorState deep_copy(const IteratorState& state) {
  IteratorState out;
  for (const auto& [key, tensor] : state) out[key] = tensor.clone();
  return out;
}

// Consumes `consumed` elements, saves, and checks that the state holds origins only (at
// most `max_bytes` in all), and that a fresh pipeline restored from it yields what the
// original yields next; then saves the restored iterator again, which must be as compact
// (fetched elements keep their origins), and resumes once more.
void expect_compact_exact_resume(const std::function<Dataset()>& make, size_t consumed,
                                 size_t max_bytes, size_t limit = 120) {
  SCOPED_TRACE(::testing::Message() << "resuming after " << consumed << " elements");
  Iterator original = make().make_iterator();
  ASSERT_EQ(drain(original, consumed).size(), consumed) << "the pipeline ended early";
  IteratorState state = deep_copy(original.save());
  EXPECT_EQ(element_entries(state), std::vector<std::string>{});
  EXPECT_LE(state_bytes(state), max_bytes);
  std::vector<std::string> expected = drain(original, limit);
  ASSERT_FALSE(expected.empty());

  Iterator resumed = make().make_iterator();
  resumed.restore(state);
  std::vector<std::string> got = drain(resumed, limit / 2);
  ASSERT_EQ(got.size(), std::min(limit / 2, expected.size()));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()))
      << "the restored iterator yields other elements";

  IteratorState again = deep_copy(resumed.save());
  EXPECT_EQ(element_entries(again), std::vector<std::string>{});
  EXPECT_LE(state_bytes(again), max_bytes);
  Iterator twice = make().make_iterator();
  twice.restore(again);
  std::vector<std::string> rest = drain(twice, expected.size() - got.size());
  ASSERT_EQ(got.size() + rest.size(), expected.size());
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), expected.begin() + got.size()))
      << "the iterator restored a second time yields other elements";
}

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
  if (!std::filesystem::exists(std::string(kFashionMnistDirectory) + "/t10k-images-idx3-ubyte.gz")) {
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
    Dataset per_file = Dataset::list_files(path("part*.tfrecord")).interleave(
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

// The entry that ends with `suffix`, as bytes ("" when there is none).
std::string entry_ending(const IteratorState& state, std::string_view suffix) {
  for (const auto& [key, tensor] : state) {
    if (key.size() >= suffix.size() && key.substr(key.size() - suffix.size()) == suffix) {
      return tensor_bytes(tensor);
    }
  }
  return "";
}

// Up to `limit` elements: their bytes, then their origins.
std::vector<std::string> drain_with_origins(Iterator& it, size_t limit) {
  std::vector<std::string> out;
  while (out.size() < limit) {
    auto e = it.next();
    if (!e) break;
    std::string origin;
    for (int64_t word : e->origin) origin += std::to_string(word) + ",";
    out.push_back(testing::bytes_of(*e) + "|" + origin);
  }
  return out;
}

TEST(CompactStateTest, AShuffleOfRowsYieldsAndSavesWhatAShuffleOfElementsDoes) {
  // Straight on an in-memory source (through shard) the shuffle holds rows and batch
  // gathers them from the source; behind a map both hold elements. Both ways must yield
  // the same batches (a short last one included) with the same origins. The buffer of
  // elements is saved as their origins; the buffer of rows as the rows drawn so far, which
  // a restore draws again.
  std::vector<float> pixels(300 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 7;
  // "t" is a transposed view, whose rows are not contiguous.
  Features features{{"x", Tensor::from_vector(pixels, {300, 4})},
                    {"t", transpose(Tensor::from_vector(pixels, {4, 300}), {1, 0})}};
  Dataset source = Dataset::from_tensor_slices(features, range(0, 300, 1, DType::kInt32));
  auto rows = [&] { return source.shard(3, 1).shuffle(40, 5).repeat(2).batch(7); };
  auto elements = [&] {
    return source.map([](Element e) { return e; }).shard(3, 1).shuffle(40, 5).repeat(2).batch(7);
  };
  Iterator by_row = rows().make_iterator(), by_element = elements().make_iterator();
  for (size_t consumed : {0, 5, 10}) {
    std::vector<std::string> a = drain_with_origins(by_row, consumed);
    std::vector<std::string> b = drain_with_origins(by_element, consumed);
    EXPECT_EQ(a, b) << "after " << consumed;
    IteratorState row_state = by_row.save();
    EXPECT_EQ(entry_ending(row_state, "buffer_origins"), "") << "after " << consumed;
    EXPECT_TRUE(std::any_of(row_state.begin(), row_state.end(), [](const auto& entry) {
      return entry.first.ends_with("replay");
    })) << "after " << consumed;
    EXPECT_NE(entry_ending(by_element.save(), "buffer_origins"), "") << "after " << consumed;
  }
  std::vector<std::string> rest = drain_with_origins(by_row, 1000);
  EXPECT_EQ(rest, drain_with_origins(by_element, 1000));
  EXPECT_EQ(rest.size(), 14u) << "200 rows make 29 batches of 7 (the last of 4), 15 taken";
  for (size_t consumed : {0, 3, 20, 28}) expect_compact_exact_resume(rows, consumed, 600, 60);
}

TEST(CompactStateTest, AShuffleOfRowsPastTheReplayBoundSavesItsBufferAndResumesExactly) {
  // A shuffle over a repeated input never starts over: past 2^21 rows drawn, a restore would
  // replay too many, and the buffer is saved as rows instead.
  Dataset source = Dataset::from_tensor_slices(range(0, 1000, 1, DType::kInt64));
  auto make = [&] { return source.repeat().shuffle(100, 3).batch(4096); };
  size_t past_bound = (size_t{1} << 21) / 4096 + 1;
  Iterator it = make().make_iterator();
  ASSERT_EQ(drain(it, past_bound).size(), past_bound);
  IteratorState state = it.save();
  EXPECT_NE(entry_ending(state, "buffer_origins"), "");
  expect_compact_exact_resume(make, past_bound, 2000, 4);
  // Below the bound: the rows drawn, no buffer.
  expect_compact_exact_resume(make, 3, 400, 4);
}

TEST(CompactStateTest, ARowReplayThatTheRestoringPipelineCannotMakeIsAnErrorNamingWhy) {
  auto rows = [](int64_t n) {
    return Dataset::from_tensor_slices(range(0, n, 1, DType::kInt64)).shuffle(40, 9);
  };
  Iterator it = rows(300).make_iterator();
  drain(it, 150);
  IteratorState state = deep_copy(it.save());
  // Fewer rows than were drawn: the state belongs to other data.
  Iterator shorter = rows(100).make_iterator();
  try {
    shorter.restore(state);
    FAIL() << "restored 150 drawn rows from 100";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("replays 150 rows, but the input ends after 100"),
              std::string::npos)
        << e.what();
  }
  // A count that no save writes (a damaged file): refused before drawing.
  IteratorState damaged = state;
  for (auto& [key, value] : damaged) {
    if (key.ends_with("replay")) value = Tensor::scalar<int64_t>(int64_t{1} << 40);
  }
  Iterator repeated = Dataset::from_tensor_slices(range(0, 300, 1, DType::kInt64))
                          .repeat()
                          .shuffle(40, 9)
                          .make_iterator();
  EXPECT_THROW(repeated.restore(damaged), DataLossError);
  // A shuffle of elements (behind a map) cannot draw rows again.
  Iterator mapped = Dataset::from_tensor_slices(range(0, 300, 1, DType::kInt64))
                        .map([](Element e) { return e; })
                        .shuffle(40, 9)
                        .make_iterator();
  try {
    mapped.restore(state);
    FAIL() << "restored rows into a shuffle of elements";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("does not yield rows"), std::string::npos) << e.what();
  }
}

TEST(CompactStateTest, AShardOfBatchesOfRowsSkipsTheOtherWorkersBatchesAsIfItMadeThem) {
  // DATA auto-sharding puts shard after batch: each worker skips the batches of the others.
  // Over rows it picks their rows without gathering them; the batches it keeps, their
  // origins and its position must be those of a shard that makes every batch.
  std::vector<float> pixels(200 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 3;
  Features features{{"x", Tensor::from_vector(pixels, {200, 3})}};
  Dataset source = Dataset::from_tensor_slices(features, range(0, 200, 1, DType::kInt32));
  for (int64_t worker : {0, 1}) {
    SCOPED_TRACE("worker " + std::to_string(worker));
    auto rows = [&] { return source.shuffle(30, 9).repeat(2).batch(6).shard(2, worker); };
    auto elements = [&] {
      return source.map([](Element e) { return e; }).shuffle(30, 9).repeat(2).batch(6).shard(2, worker);
    };
    Iterator by_row = rows().make_iterator(), by_element = elements().make_iterator();
    std::vector<std::string> a = drain_with_origins(by_row, 1000);
    EXPECT_EQ(a, drain_with_origins(by_element, 1000));
    EXPECT_EQ(a.size(), worker == 0 ? 34u : 33u) << "400 rows make 67 batches of 6 (the last of 4)";
    for (size_t consumed : {0, 5, 32}) expect_compact_exact_resume(rows, consumed, 600, 60);
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
