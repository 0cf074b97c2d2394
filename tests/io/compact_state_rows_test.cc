// Compact iterator state over rows of an in-memory source: a shuffle of rows yields and
// saves what a shuffle of elements does (its buffer saved once past the replay bound), a
// replay the restoring pipeline cannot make is an error naming why, and a shard of batches
// of rows skips the other workers' batches.
#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/ops/array.h"
#include "tests/io/compact_state_test.h"
#include "tests/io/dataset_helpers.h"

namespace cadre::io {
namespace {

using test_helpers::deep_copy;
using test_helpers::drain;
using test_helpers::element_entries;
using test_helpers::expect_compact_exact_resume;

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
    out.push_back(test_helpers::bytes_of(*e) + "|" + origin);
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
    EXPECT_TRUE(std::any_of(row_state.begin(), row_state.end(),
                            [](const auto& entry) { return entry.first.ends_with("replay"); }))
        << "after " << consumed;
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
      return source.map([](Element e) { return e; })
          .shuffle(30, 9)
          .repeat(2)
          .batch(6)
          .shard(2, worker);
    };
    Iterator by_row = rows().make_iterator(), by_element = elements().make_iterator();
    std::vector<std::string> a = drain_with_origins(by_row, 1000);
    EXPECT_EQ(a, drain_with_origins(by_element, 1000));
    EXPECT_EQ(a.size(), worker == 0 ? 34u : 33u) << "400 rows make 67 batches of 6 (the last of 4)";
    for (size_t consumed : {0, 5, 32}) expect_compact_exact_resume(rows, consumed, 600, 60);
  }
}

}  // namespace
}  // namespace cadre::io
