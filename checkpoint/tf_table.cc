#include "checkpoint/tf_table.h"

#include <cstdio>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterBytes = 48;   // two handles padded to 40 bytes, then the magic
constexpr size_t kTrailerBytes = 5;   // compression type, masked CRC-32C
constexpr int kRestartInterval = 16;  // entries between full keys, as LevelDB's default

void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void append_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::string table_hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

uint32_t load_fixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads the table's bytes with bounds checks; every failure is a DataLossError naming the
// file.
class TableCursor {
 public:
  explicit TableCursor(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(str_cat(file_, ": not a TensorFlow checkpoint index (", what, ")"));
  }

  uint64_t varint(std::string_view& in, const char* what) const {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in.empty()) fail(str_cat("a ", what, " runs past its block"));
      auto byte = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) return v;
    }
    fail(str_cat("a ", what, " is longer than 10 bytes"));
  }

  // The contents of the block a handle at the front of `in` points to, checksum checked.
  std::string_view block(std::string_view file_bytes, std::string_view& in) const {
    uint64_t offset = varint(in, "block offset");
    uint64_t size = varint(in, "block size");
    if (offset > file_bytes.size() || size > file_bytes.size() - offset ||
        kTrailerBytes > file_bytes.size() - offset - size) {
      fail(str_cat("a block at ", offset, " of ", size, " bytes is past the end of the ",
                   file_bytes.size(), "-byte file"));
    }
    std::string_view contents = file_bytes.substr(offset, size);
    const char* trailer = file_bytes.data() + offset + size;
    uint32_t stored = load_fixed32(trailer + 1);
    uint32_t computed = mask_crc(crc32c::extend(crc32c::value(contents), trailer, 1));
    if (stored != computed) {
      fail(str_cat("the block at ", offset, " fails its checksum: stored 0x", table_hex(stored),
                   ", computed 0x", table_hex(computed)));
    }
    if (trailer[0] != 0) {
      fail(str_cat("the block at ", offset, " uses compression ", static_cast<int>(trailer[0]),
                   "; only uncompressed blocks are read"));
    }
    return contents;
  }

  // The entries of a block, keys rebuilt from their shared prefixes.
  void entries(std::string_view block, TableEntries& out) const {
    if (block.size() < 4) fail("a block shorter than its restart count");
    uint32_t restarts = load_fixed32(block.data() + block.size() - 4);
    if (restarts == 0 || restarts > (block.size() - 4) / 4) fail("a bad restart count");
    std::string_view in = block.substr(0, block.size() - 4 - 4 * size_t{restarts});
    std::string key;
    while (!in.empty()) {
      uint64_t shared = varint(in, "key prefix length");
      uint64_t own = varint(in, "key length");
      uint64_t value = varint(in, "value length");
      if (shared > key.size() || own > in.size() || value > in.size() - own) {
        fail("an entry runs past its block");
      }
      key.resize(shared);
      key.append(in.substr(0, own));
      out.emplace_back(key, std::string(in.substr(own, value)));
      in.remove_prefix(own + value);
    }
  }

 private:
  const std::string& file_;
};

// A block of sorted entries with restart points, being filled.
class BlockBuilder {
 public:
  void add(const std::string& key, const std::string& value) {
    size_t shared = 0;
    if (count_ % kRestartInterval == 0) {
      restarts_.push_back(static_cast<uint32_t>(bytes_.size()));
    } else {
      while (shared < key.size() && shared < last_.size() && key[shared] == last_[shared]) {
        ++shared;
      }
    }
    append_varint(bytes_, shared);
    append_varint(bytes_, key.size() - shared);
    append_varint(bytes_, value.size());
    bytes_.append(key, shared);
    bytes_.append(value);
    last_ = key;
    ++count_;
  }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return count_ == 0; }
  const std::string& last_key() const { return last_; }

  // Writes the block and its trailer at the end of `file`; returns its handle.
  std::string finish_into(std::string& file) {
    if (restarts_.empty()) restarts_.push_back(0);
    for (uint32_t r : restarts_) append_fixed32(bytes_, r);
    append_fixed32(bytes_, static_cast<uint32_t>(restarts_.size()));
    std::string handle;
    append_varint(handle, file.size());
    append_varint(handle, bytes_.size());
    const char type = 0;
    file += bytes_;
    file.push_back(type);
    append_fixed32(file, mask_crc(crc32c::extend(crc32c::value(bytes_), &type, 1)));
    *this = BlockBuilder();
    return handle;
  }

 private:
  std::string bytes_, last_;
  std::vector<uint32_t> restarts_;
  int count_ = 0;
};

}  // namespace

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

TableEntries read_table(std::string_view bytes, const std::string& file) {
  TableCursor cursor(file);
  if (bytes.size() < kFooterBytes) cursor.fail(str_cat("only ", bytes.size(), " bytes"));
  const char* footer = bytes.data() + bytes.size() - kFooterBytes;
  uint64_t magic = load_fixed32(footer + 40) | uint64_t{load_fixed32(footer + 44)} << 32;
  if (magic != kTableMagic) cursor.fail("no table magic number at its end");
  std::string_view handles(footer, 40);
  cursor.block(bytes, handles);  // the meta-index: checked, and bundles keep nothing there
  TableEntries index;
  cursor.entries(cursor.block(bytes, handles), index);
  TableEntries entries;
  for (const auto& [separator, handle] : index) {
    std::string_view in = handle;
    cursor.entries(cursor.block(bytes, in), entries);
  }
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i - 1].first >= entries[i].first) cursor.fail("keys out of order");
  }
  return entries;
}

std::string build_table(const TableEntries& entries, size_t block_bytes) {
  std::string file;
  BlockBuilder data, index;
  auto flush = [&] {
    std::string last = data.last_key();
    index.add(last, data.finish_into(file));
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i - 1].first >= entries[i].first) {
      throw InvalidArgumentError(str_cat("table keys must increase: '", entries[i].first,
                                         "' follows '", entries[i - 1].first, "'"));
    }
    data.add(entries[i].first, entries[i].second);
    if (data.size() >= block_bytes) flush();
  }
  if (!data.empty()) flush();
  std::string footer = BlockBuilder().finish_into(file);  // the empty meta-index
  footer += index.finish_into(file);
  footer.resize(40, '\0');
  append_fixed32(footer, static_cast<uint32_t>(kTableMagic));
  append_fixed32(footer, static_cast<uint32_t>(kTableMagic >> 32));
  return file + footer;
}

}  // namespace cadre::checkpoint::internal
