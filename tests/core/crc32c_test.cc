// CRC-32C against its definition, bit at a time, over the stripes and tails of the fast path.
#include "core/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace cadre {
namespace {

// Reflected polynomial 0x82F63B78, initial and final complement.
uint32_t crc32c_by_definition(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI) appendix B.4 and the usual "123456789" check value.
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  const std::pair<std::string, uint32_t> vectors[] = {
      {"123456789", 0xE3069283u},
      {std::string(32, '\0'), 0x8A9136AAu},
      {std::string(32, '\xFF'), 0x62A8AB43u},
      {ascending, 0x46DD794Eu},
      {"", 0u},
  };
  for (const auto& [data, crc] : vectors) {
    EXPECT_EQ(crc32c_by_definition(data), crc);
    EXPECT_EQ(crc32c::value(data), crc);
    EXPECT_EQ(crc32c::internal::extend_tables(0, data.data(), data.size()), crc);
  }
}

// Lengths around the three-stripe block (3 x 32 KiB) and the 8-byte words, split anywhere.
TEST(Crc32cTest, ExtendAndCombineMatchTheDefinitionAcrossStripesAndSplits) {
  std::string data(300'001, '\0');
  uint32_t seed = 1;
  for (char& c : data) c = static_cast<char>((seed = seed * 1103515245u + 12345u) >> 24);
  for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{98'303},
                      size_t{98'304}, size_t{98'305}, size_t{200'000}, data.size()}) {
    std::string part = data.substr(0, size);
    uint32_t expected = crc32c_by_definition(part);
    EXPECT_EQ(crc32c::value(part), expected) << size;
    EXPECT_EQ(crc32c::internal::extend_tables(0, part.data(), size), expected) << size;
    size_t cut = size / 3;
    uint32_t head = crc32c::value(part.data(), cut);
    EXPECT_EQ(crc32c::extend(head, part.data() + cut, size - cut), expected) << size;
    EXPECT_EQ(crc32c::combine(head, crc32c::value(part.data() + cut, size - cut), size - cut),
              expected)
        << size;
  }
}

// Every length of a few 256-byte blocks (where the folding path starts, and its tail), at
// every alignment of a cache line, from a register that is not the first.
TEST(Crc32cTest, EveryLengthAndAlignmentAroundTheFoldedBlocksMatchesTheTables) {
  std::string data(4096 + 64, '\0');
  uint32_t seed = 7;
  for (char& c : data) c = static_cast<char>((seed = seed * 1103515245u + 12345u) >> 24);
  const uint32_t head = crc32c::value("head");
  for (size_t offset = 0; offset < 64; offset += 9) {
    for (size_t size = 1000; size <= 1800; ++size) {
      const char* bytes = data.data() + offset;
      ASSERT_EQ(crc32c::value(bytes, size), crc32c::internal::extend_tables(0, bytes, size))
          << "offset " << offset << ", size " << size;
      ASSERT_EQ(crc32c::extend(head, bytes, size),
                crc32c::internal::extend_tables(head, bytes, size))
          << "offset " << offset << ", size " << size;
    }
  }
  EXPECT_EQ(crc32c::value(data.data(), 4096), crc32c_by_definition(data.substr(0, 4096)));
  // All ones and all zeros (a folded lane of zeros must stay the message's zeros).
  for (char fill : {'\0', '\xFF'}) {
    std::string same(5000, fill);
    EXPECT_EQ(crc32c::value(same), crc32c_by_definition(same)) << int(fill);
  }
}

}  // namespace
}  // namespace cadre
