// Helpers for reading what a Dataset yields in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cadre/io/dataset.h"
#include "io/element_codec.h"

namespace cadre::io::test_helpers {

// The single int64 value of each element, up to `limit` elements.
inline std::vector<int64_t> values_of(const Dataset& dataset, size_t limit = 100000) {
  std::vector<int64_t> out;
  Iterator it = dataset.make_iterator();
  while (out.size() < limit) {
    auto e = it.next();
    if (!e) break;
    out.push_back(e->value().item<int64_t>());
  }
  return out;
}

// Every element's bytes (names, dtypes, shapes and values), for exact comparisons.
inline std::string bytes_of(const Element& e) {
  std::string out;
  encode_element(e, out);
  return out;
}

inline std::vector<std::string> drain(Iterator& it, size_t limit) {
  std::vector<std::string> out;
  while (out.size() < limit) {
    auto e = it.next();
    if (!e) break;
    out.push_back(bytes_of(*e));
  }
  return out;
}

}  // namespace cadre::io::test_helpers
