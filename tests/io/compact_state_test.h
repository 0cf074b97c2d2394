// What the compact iterator state tests share (compact_state_test.cc,
// compact_state_rows_test.cc): the size and the element entries of a state, and the check
// that a pipeline saves origins only and resumes exactly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cadre/io/dataset.h"
#include "tests/io/dataset_helpers.h"

namespace cadre::io::test_helpers {

inline size_t state_bytes(const IteratorState& state) {
  size_t bytes = 0;
  for (const auto& [key, tensor] : state) bytes += key.size() + tensor.nbytes();
  return bytes;
}

// Keys of entries that hold whole encoded elements (buffers saved the old way).
inline std::vector<std::string> element_entries(const IteratorState& state) {
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

inline IteratorState deep_copy(const IteratorState& state) {
  IteratorState out;
  for (const auto& [key, tensor] : state) out[key] = tensor.clone();
  return out;
}

// Consumes `consumed` elements, saves, and checks that the state holds origins only (at
// most `max_bytes` in all), and that a fresh pipeline restored from it yields what the
// original yields next; then saves the restored iterator again, which must be as compact
// (fetched elements keep their origins), and resumes once more.
inline void expect_compact_exact_resume(const std::function<Dataset()>& make, size_t consumed,
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

}  // namespace cadre::io::test_helpers
