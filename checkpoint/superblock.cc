#include "checkpoint/superblock.h"

#include <cstring>
#include <string_view>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

constexpr std::string_view kSignature("\x89HDF\r\n\x1a\n", 8);

class Superblock {
 public:
  Superblock(const std::string& path, const std::string& head, uint64_t file_size)
      : path_(path), head_(head), file_size_(file_size) {}

  void check() {
    if (head_.size() < 16 || std::string_view(head_).substr(0, 8) != kSignature) {
      damaged("does not begin the file (a user block, which checkpoints never have, or damage)");
    }
    int version = byte(8);
    if (version > 3) damaged(str_cat("has superblock version ", version, " (known: 0 to 3)"));
    // Versions 0 and 1 put the sizes after three format versions and a reserved byte, and
    // the addresses after the B-tree parameters; 2 and 3 put both first.
    size_t sizes = version <= 1 ? 13 : 9;
    int offset_bytes = byte(sizes), length_bytes = byte(sizes + 1);
    // Every HDF5 writer in use (libhdf5's defaults, h5py, ours) writes 8-byte addresses and
    // lengths; other sizes are legal but only ever seen in damaged files.
    for (int size : {offset_bytes, length_bytes}) {
      if (size != 8) damaged(str_cat("declares ", size, "-byte addresses or lengths (expected 8)"));
    }
    size_t at = version == 0 ? 24 : version == 1 ? 28 : 12;
    uint64_t base = address(at);
    if (base != 0) damaged(str_cat("has base address ", base, " (expected 0)"));
    if (version <= 1) {
      uint64_t free_space = address(at + 8);
      uint64_t end = address(at + 16);
      uint64_t driver = address(at + 24);
      check_end(end);
      check_inside("free-space", free_space, end);
      // Only the family and multi file drivers write one, and its size is what libhdf5
      // allocates: a checkpoint (one file, the default driver) has none.
      if (driver != undefined()) {
        damaged(str_cat("names a driver information block at byte ", driver,
                        " (checkpoints are single files and have none)"));
      }
    } else {
      uint64_t extension = address(at + 8);
      uint64_t end = address(at + 16);
      uint64_t root = address(at + 24);
      check_end(end);
      check_inside("superblock extension", extension, end);
      if (root == undefined()) damaged("has no root group");
      check_inside("root group", root, end);
    }
  }

 private:
  [[noreturn]] void damaged(const std::string& what) const {
    throw DataLossError(str_cat("checkpoint ", path_, " is damaged: its HDF5 superblock ", what));
  }

  int byte(size_t at) const {
    if (at >= head_.size()) damaged(str_cat("is cut short (", file_size_, " bytes in the file)"));
    return static_cast<unsigned char>(head_[at]);
  }

  // A little-endian address of 8 bytes.
  uint64_t address(size_t at) const {
    uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = value << 8 | byte(at + i);
    return value;
  }

  // HDF5's "undefined address": all bits set.
  static constexpr uint64_t undefined() { return ~uint64_t{0}; }

  void check_end(uint64_t end) const {
    if (end == undefined() || end > file_size_) {
      damaged(
          str_cat("says the file ends at byte ", end, " but it has ", file_size_, " (truncated)"));
    }
  }

  void check_inside(const char* what, uint64_t address, uint64_t end) const {
    if (address != undefined() && address >= end) {
      damaged(str_cat("puts the ", what, " at byte ", address, ", past the end at ", end));
    }
  }

  const std::string& path_;
  const std::string& head_;
  uint64_t file_size_;
};

// Bob Jenkins' lookup3 hash ("hashlittle"), which HDF5 uses for its metadata checksums.
uint32_t rotate(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

uint32_t little_word(const unsigned char* bytes) {
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 |
         uint32_t{bytes[3]} << 24;
}

// lookup3's rounds: x -= z; x ^= z <<< k; z += y (mixing), x ^= y; x -= y <<< k (final).
void mix_round(uint32_t& x, uint32_t& y, uint32_t& z, int k) {
  x -= z;
  x ^= rotate(z, k);
  z += y;
}

void final_round(uint32_t& x, uint32_t y, int k) {
  x ^= y;
  x -= rotate(y, k);
}

uint32_t lookup3(const unsigned char* bytes, size_t size) {
  uint32_t a, b, c;
  a = b = c = 0xdeadbeefu + static_cast<uint32_t>(size);
  while (size > 12) {
    a += little_word(bytes);
    b += little_word(bytes + 4);
    c += little_word(bytes + 8);
    mix_round(a, b, c, 4);
    mix_round(b, c, a, 6);
    mix_round(c, a, b, 8);
    mix_round(a, b, c, 16);
    mix_round(b, c, a, 19);
    mix_round(c, a, b, 4);
    bytes += 12;
    size -= 12;
  }
  if (size == 0) return c;
  unsigned char tail[12] = {};
  std::memcpy(tail, bytes, size);
  a += little_word(tail);
  b += little_word(tail + 4);
  c += little_word(tail + 8);
  final_round(c, b, 14);
  final_round(a, c, 11);
  final_round(b, a, 25);
  final_round(c, b, 16);
  final_round(a, c, 4);
  final_round(b, a, 14);
  final_round(c, b, 24);
  return c;
}

}  // namespace

uint64_t seal_superblock(char* image, size_t size) {
  // Versions 2 and 3 with 8-byte addresses: signature (8), version, address and length
  // sizes, flags, four addresses (base, extension, end of file, root group), checksum.
  constexpr size_t kFlags = 11, kEnd = 28, kChecksum = 44, kSize = 48;
  auto* bytes = reinterpret_cast<unsigned char*>(image);
  if (size < kSize || std::string_view(image, 8) != kSignature || bytes[8] < 2 || bytes[8] > 3 ||
      bytes[9] != 8 || bytes[10] != 8) {
    throw InternalError("an in-memory checkpoint has an unexpected HDF5 superblock");
  }
  bytes[kFlags] &= static_cast<unsigned char>(~1u);  // "open for writing"
  uint32_t checksum = lookup3(bytes, kChecksum);
  for (int i = 0; i < 4; ++i)
    bytes[kChecksum + i] = static_cast<unsigned char>(checksum >> (8 * i));
  uint64_t end = 0;
  for (int i = 7; i >= 0; --i) end = end << 8 | bytes[kEnd + i];
  return end;
}

void check_superblock(const std::string& path, const std::string& head, uint64_t file_size) {
  Superblock(path, head, file_size).check();
}

}  // namespace cadre::checkpoint::internal
