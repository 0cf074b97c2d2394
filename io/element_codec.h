// A byte encoding of elements, for iterator state (buffered elements) and file caches.
//
// Little-endian, versioned by a leading magic. Tensors are copied to host memory. Decoding
// checks every length against the bytes present and throws DataLossError naming `what`
// (e.g. the file or state key) and the byte offset when the bytes are damaged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/io/element.h"

namespace cadre::io {

// Appends one element to `out`.
void encode_element(const Element& element, std::string& out);
// Reads one element from `bytes` starting at `offset`, which it advances.
Element decode_element(std::string_view bytes, size_t& offset, std::string_view what);

// A list of elements as one byte string, and back.
std::string encode_elements(const std::vector<Element>& elements);
std::vector<Element> decode_elements(std::string_view bytes, std::string_view what);

}  // namespace cadre::io
