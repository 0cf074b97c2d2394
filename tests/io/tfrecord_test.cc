// CRC-32C, TFRecord framing against bytes worked out from the format definition, and damage
// detection.
#include "cadre/io/tfrecord.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "io/crc32c.h"
#include "tests/io/temp_dir.h"

namespace cadre::io {
namespace {

// The CRC-32C definition, one bit at a time (reflected polynomial 0x82F63B78, initial and
// final complement): the reference the fast implementations must agree with.
uint32_t crc32c_by_definition(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
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
    if (crc32c::internal::cpu_has_sse42()) {
      EXPECT_EQ(crc32c::internal::extend_sse42(0, data.data(), data.size()), crc);
    }
  }
}

TEST(Crc32cTest, ExtendEqualsOneShotAtEveryLengthAndSplit) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  for (size_t n = 0; n <= data.size(); n += 7) {
    std::string prefix = data.substr(0, n);
    uint32_t whole = crc32c_by_definition(prefix);
    ASSERT_EQ(crc32c::value(prefix), whole) << n;
    ASSERT_EQ(crc32c::internal::extend_tables(0, prefix.data(), n), whole) << n;
    size_t split = n / 3;
    EXPECT_EQ(crc32c::extend(crc32c::value(prefix.data(), split), prefix.data() + split, n - split),
              whole);
  }
}

TEST(Crc32cTest, MaskIsTheRotationPlusTheTFRecordConstant) {
  EXPECT_EQ(crc32c::mask(0), 0xA282EAD8u);
  // 0xE3069283 rotated right by 15 is 0x2507C60D; plus 0xA282EAD8 is 0xC78AB0E5.
  EXPECT_EQ(crc32c::mask(0xE3069283u), 0xC78AB0E5u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) {
    EXPECT_EQ(crc32c::unmask(crc32c::mask(crc)), crc);
  }
}

// The frame of "abc": length 3 as 8 little-endian bytes; the masked CRC of those 8 bytes
// (CRC 0x576C35E3 per the definition above, masked 0x0E4999B0); the data; the masked CRC
// of "abc" (CRC 0x364B3FB7, masked 0x21F1576E), each CRC stored little-endian.
const std::string kAbcFrame = bytes({0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
                                     0xb0, 0x99, 0x49, 0x0e,                          //
                                     0x61, 0x62, 0x63,                                //
                                     0x6e, 0x57, 0xf1, 0x21});
// An empty record: the CRC of no bytes is 0, masked 0xA282EAD8.
const std::string kEmptyFrame = bytes({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
                                       0x29, 0x03, 0x98, 0x07,                          //
                                       0xd8, 0xea, 0x82, 0xa2});

TEST(TFRecordFormatTest, FramesMatchBytesWorkedOutByHand) {
  EXPECT_EQ(crc32c_by_definition(std::string(kAbcFrame.data(), 8)), 0x576C35E3u);
  EXPECT_EQ(crc32c::mask(0x576C35E3u), 0x0E4999B0u);
  EXPECT_EQ(crc32c_by_definition("abc"), 0x364B3FB7u);
  EXPECT_EQ(crc32c::mask(0x364B3FB7u), 0x21F1576Eu);
  EXPECT_EQ(frame_record("abc"), kAbcFrame);
  EXPECT_EQ(frame_record(""), kEmptyFrame);
}

class TFRecordTest : public testing::TempDirTest {};

TEST_F(TFRecordTest, WriterProducesTheFramesAndReaderReadsThemBack) {
  std::string file = path("a.tfrecord");
  TFRecordWriter writer(file);
  writer.write("abc");
  writer.write("");
  EXPECT_EQ(writer.offset(), kAbcFrame.size() + kEmptyFrame.size());
  writer.close();
  EXPECT_EQ(read_file(file), kAbcFrame + kEmptyFrame);

  TFRecordReader reader(file);
  EXPECT_EQ(reader.read(), "abc");
  EXPECT_EQ(reader.offset(), kAbcFrame.size());
  EXPECT_EQ(reader.read(), "");
  EXPECT_EQ(reader.read(), std::nullopt);
  reader.seek(0);
  EXPECT_EQ(reader.read(), "abc");
}

TEST_F(TFRecordTest, ReadsLargeRecordsAndDatasets) {
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  std::string file = path("big.tfrecord");
  {
    TFRecordWriter writer(file);
    writer.write(big);
    writer.write("tail");
  }
  std::vector<std::string> got;
  Iterator it = tfrecord_dataset({file, file}).make_iterator();
  while (auto e = it.next()) got.push_back(tensor_bytes(e->value()));
  EXPECT_EQ(got, (std::vector<std::string>{big, "tail", big, "tail"}));
}

TEST_F(TFRecordTest, MissingFileIsNotFoundNamingIt) {
  std::string file = path("absent.tfrecord");
  try {
    tfrecord_dataset({file});
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  EXPECT_THROW(TFRecordReader{file}, NotFoundError);
}

// Reads every record of `file`, returning the DataLossError's message.
std::string data_loss_message(const std::string& file) {
  TFRecordReader reader(file);
  try {
    while (reader.read()) {
    }
  } catch (const DataLossError& e) {
    return e.what();
  }
  return "no DataLossError";
}

TEST_F(TFRecordTest, DamageIsDataLossNamingFileAndOffset) {
  std::string two = kAbcFrame + kAbcFrame;  // the second record starts at offset 19

  std::string flipped_data = two;
  flipped_data[19 + 13] ^= 0x01;  // 'b' of the second record, at offset 32
  std::string file = write_file("data.tfrecord", flipped_data);
  std::string m = data_loss_message(file);
  EXPECT_NE(m.find(file), std::string::npos) << m;
  EXPECT_NE(m.find("byte offset 31"), std::string::npos) << m;  // the damaged record's data
  EXPECT_NE(m.find("CRC"), std::string::npos) << m;

  std::string flipped_length = two;
  flipped_length[19] = 0x04;
  file = write_file("length.tfrecord", flipped_length);
  m = data_loss_message(file);
  EXPECT_NE(m.find("byte offset 19"), std::string::npos) << m;

  std::string flipped_crc = two;
  flipped_crc.back() ^= 0x40;
  file = write_file("crc.tfrecord", flipped_crc);
  EXPECT_NE(data_loss_message(file).find("byte offset 31"), std::string::npos);

  file = write_file("cut_data.tfrecord", two.substr(0, 19 + 14));
  m = data_loss_message(file);
  EXPECT_NE(m.find("truncated at byte offset 33"), std::string::npos) << m;

  file = write_file("cut_header.tfrecord", two.substr(0, 19 + 5));
  m = data_loss_message(file);
  EXPECT_NE(m.find("truncated at byte offset 24"), std::string::npos) << m;

  // Through a dataset, the error reaches the consumer after the good record.
  Iterator it = tfrecord_dataset({write_file("d.tfrecord", flipped_data)}).make_iterator();
  EXPECT_TRUE(it.next());
  EXPECT_THROW(it.next(), DataLossError);
}

}  // namespace
}  // namespace cadre::io
