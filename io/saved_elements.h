// Elements that a stage holds (a shuffle buffer, prefetched results) in iterator state: as
// their origins when the stage they came from can fetch them again, a few bytes each, and
// encoded whole otherwise (generators, zip, enumerate upstream).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/io/element.h"
#include "cadre/io/iterator_state.h"
#include "io/dataset_node.h"

namespace cadre::io {

// Writes `elements` under `key`: as origins ("<key>_origins") when `source` can fetch and
// every element has an origin, else encoded ("<key>"). Elements for which `skip` is true
// (placeholders at the positions of buffered errors) need no origin. `encoded`, when
// given, holds for each element its origin as encode_origin_words made it ahead of time
// (empty: not done), which spares the saving thread the encoding.
void save_elements(StateWriter& writer, std::string_view key,
                   std::span<const Element* const> elements, const DatasetNode& source,
                   const std::vector<bool>& skip = {},
                   std::span<const std::string* const> encoded = {});
void save_elements(StateWriter& writer, std::string_view key, const std::vector<Element>& elements,
                   const DatasetNode& source);
// Rows held by origin alone (a shuffle over an in-memory source), written as save_elements
// writes elements whose origins are those rows.
void save_rows(StateWriter& writer, std::string_view key, std::span<const int64_t> rows);
// What save_elements wrote, fetched from `source` or decoded. A placeholder (empty origin)
// comes back as an empty Element.
std::vector<Element> restore_elements(const StateReader& reader, std::string_view key,
                                      const DatasetNode& source);

// The words of an origin as save_elements writes them (no length).
std::string encode_origin_words(std::span<const int64_t> origin);

// One origin as bytes (for the element an interleave slot was made from), and back.
std::string encode_origin(std::span<const int64_t> origin);
std::vector<int64_t> decode_origin(std::string_view bytes, std::string_view what);

}  // namespace cadre::io
