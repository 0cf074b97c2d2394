#include "io/saved_elements.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

// Origins are small non-negative numbers (row indices, byte offsets) written as LEB128
// varints, zigzag-coded so that a negative value (a range counting down) stays short:
// a buffer of 10,000 rows of a 60,000-row source takes about 30 KB.
//
// put_varint writes into memory with room for it (kMaxVarint bytes); returns the end. A save
// encodes thousands of origins on the training thread, where a string's push_back per byte costs
// more than the encoding.
constexpr size_t kMaxVarint = 10;
char* put_varint(char* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<char>(v);
  return out;
}

uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// The words of an origin, zigzag-coded varints (room: kMaxVarint bytes a word).
char* put_words(char* out, std::span<const int64_t> origin) {
  for (int64_t word : origin) out = put_varint(out, zigzag(word));
  return out;
}
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

class VarintReader {
 public:
  VarintReader(std::string_view bytes, std::string_view what) : bytes_(bytes), what_(what) {}
  uint64_t next() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (offset_ >= bytes_.size()) {
        throw DataLossError(str_cat(what_, " is truncated at byte offset ", offset_));
      }
      auto byte = static_cast<uint8_t>(bytes_[offset_++]);
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return v;
    }
    throw DataLossError(
        str_cat(what_, " holds a number longer than 64 bits at byte offset ", offset_));
  }
  // A count of things each taking at least one more byte: bounded by what is left, so that
  // a damaged count cannot ask for a huge allocation.
  size_t count(std::string_view of) {
    uint64_t n = next();
    if (n > bytes_.size() - offset_) {
      throw DataLossError(str_cat(what_, " is damaged: it declares ", n, " ", of, " in ",
                                  bytes_.size() - offset_, " remaining bytes"));
    }
    return static_cast<size_t>(n);
  }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::string_view what_;
  size_t offset_ = 0;
};

std::string origins_key(std::string_view key) { return str_cat(key, "_origins"); }

}  // namespace

std::string encode_origin(std::span<const int64_t> origin) {
  std::string bytes((1 + origin.size()) * kMaxVarint, '\0');
  char* out = put_words(put_varint(bytes.data(), origin.size()), origin);
  bytes.resize(static_cast<size_t>(out - bytes.data()));
  return bytes;
}

std::vector<int64_t> decode_origin(std::string_view bytes, std::string_view what) {
  VarintReader in(bytes, what);
  std::vector<int64_t> origin(in.count("words"));
  for (int64_t& word : origin) word = unzigzag(in.next());
  if (!in.done()) throw DataLossError(str_cat(what, " has bytes after its origin"));
  return origin;
}

std::string encode_origin_words(std::span<const int64_t> origin) {
  std::string bytes(origin.size() * kMaxVarint, '\0');
  bytes.resize(static_cast<size_t>(put_words(bytes.data(), origin) - bytes.data()));
  return bytes;
}

void save_elements(StateWriter& writer, std::string_view key,
                   std::span<const Element* const> elements, const DatasetNode& source,
                   const std::vector<bool>& skip, std::span<const std::string* const> encoded) {
  auto skipped = [&](size_t i) { return i < skip.size() && skip[i]; };
  bool by_origin = source.can_fetch();
  for (size_t i = 0; by_origin && i < elements.size(); ++i) {
    by_origin = skipped(i) || !elements[i]->origin.empty();
  }
  if (!by_origin) {
    std::vector<Element> copies;
    copies.reserve(elements.size());
    for (size_t i = 0; i < elements.size(); ++i) {
      copies.push_back(skipped(i) ? Element() : *elements[i]);
    }
    writer.write_elements(key, copies);
    return;
  }
  // A count, then the words per origin when all have as many (0 if not), then the
  // origins: each with its length first when they differ.
  size_t width = elements.empty() || skipped(0) ? 0 : elements[0]->origin.size();
  for (size_t i = 0; i < elements.size() && width > 0; ++i) {
    if (skipped(i) || elements[i]->origin.size() != width) width = 0;
  }
  auto ahead = [&](size_t i) -> const std::string* {
    return i < encoded.size() && encoded[i] != nullptr && !encoded[i]->empty() ? encoded[i]
                                                                               : nullptr;
  };
  size_t room = 2 * kMaxVarint;
  for (size_t i = 0; i < elements.size(); ++i) {
    const std::string* bytes = skipped(i) ? nullptr : ahead(i);
    room += kMaxVarint +
            (bytes ? bytes->size() : (skipped(i) ? 0 : elements[i]->origin.size()) * kMaxVarint);
  }
  std::string bytes(room, '\0');
  char* out = put_varint(bytes.data(), elements.size());
  out = put_varint(out, width);
  for (size_t i = 0; i < elements.size(); ++i) {
    std::span<const int64_t> origin;
    if (!skipped(i)) origin = elements[i]->origin;
    if (width == 0) out = put_varint(out, origin.size());
    if (const std::string* words = skipped(i) ? nullptr : ahead(i)) {
      out = std::copy(words->begin(), words->end(), out);
      continue;
    }
    out = put_words(out, origin);
  }
  bytes.resize(static_cast<size_t>(out - bytes.data()));
  writer.write_string(origins_key(key), bytes);
}

void save_rows(StateWriter& writer, std::string_view key, std::span<const int64_t> rows) {
  std::string bytes((2 + rows.size()) * kMaxVarint, '\0');
  char* out = put_varint(bytes.data(), rows.size());
  out = put_varint(out, rows.empty() ? 0 : 1);  // one word per origin
  for (const int64_t& row : rows) out = put_words(out, {&row, 1});
  bytes.resize(static_cast<size_t>(out - bytes.data()));
  writer.write_string(origins_key(key), bytes);
}

void save_elements(StateWriter& writer, std::string_view key, const std::vector<Element>& elements,
                   const DatasetNode& source) {
  std::vector<const Element*> pointers;
  pointers.reserve(elements.size());
  for (const Element& e : elements) pointers.push_back(&e);
  save_elements(writer, key, pointers, source);
}

std::vector<Element> restore_elements(const StateReader& reader, std::string_view key,
                                      const DatasetNode& source) {
  std::string okey = origins_key(key);
  if (!reader.contains(okey)) return reader.read_elements(key);
  std::string what = str_cat("the origins of iterator state entry '", okey, "'");
  if (!source.can_fetch()) {
    throw InvalidArgumentError(
        str_cat(what, " need a '", source.kind(),
                "' stage that fetches elements by origin; this pipeline's "
                "cannot: restore the state into the pipeline that saved it"));
  }
  std::string bytes = reader.read_string(okey);
  VarintReader in(bytes, what);
  size_t count = in.count("elements");
  uint64_t width = in.next();
  if (width > bytes.size()) throw DataLossError(str_cat(what, " declares ", width, " words each"));
  std::vector<Element> elements;
  elements.reserve(count);
  std::vector<int64_t> origin;
  for (size_t i = 0; i < count; ++i) {
    size_t words = width > 0 ? static_cast<size_t>(width) : in.count("words");
    origin.resize(words);
    for (int64_t& word : origin) word = unzigzag(in.next());
    elements.push_back(origin.empty() ? Element() : source.fetch(origin));
  }
  if (!in.done()) throw DataLossError(str_cat(what, " has bytes after its ", count, " origins"));
  return elements;
}

}  // namespace cadre::io
