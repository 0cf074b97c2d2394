// The masked CRCs and TFRecord framing against bytes worked out from the format definition, and
// damage detection.
#include "cadre/io/tfrecord.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "core/base/crc32c.h"
#include "io/masked_crc.h"
#include "tests/support/bytes.h"
#include "tests/support/fault_env.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using cadre::testing::bytes;

TEST(MaskedCrcTest, IsTheRotationPlusTheTFRecordConstant) {
  EXPECT_EQ(mask_crc(0), 0xA282EAD8u);
  // 0xE3069283 rotated right by 15 is 0x2507C60D; plus 0xA282EAD8 is 0xC78AB0E5.
  EXPECT_EQ(mask_crc(0xE3069283u), 0xC78AB0E5u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) {
    EXPECT_EQ(unmask_crc(mask_crc(crc)), crc);
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
  EXPECT_EQ(crc32c::value(std::string(kAbcFrame.data(), 8)), 0x576C35E3u);
  EXPECT_EQ(mask_crc(0x576C35E3u), 0x0E4999B0u);
  EXPECT_EQ(crc32c::value("abc"), 0x364B3FB7u);
  EXPECT_EQ(mask_crc(0x364B3FB7u), 0x21F1576Eu);
  EXPECT_EQ(frame_record("abc"), kAbcFrame);
  EXPECT_EQ(frame_record(""), kEmptyFrame);
}

class TFRecordTest : public cadre::testing::TempDirTest {};

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

TEST_F(TFRecordTest, TheWriterWritesThroughItsEnvAndReportsItsFailures) {
  auto env = std::make_shared<cadre::testing::FaultEnv>();
  std::string file = path("b.tfrecord");
  {
    TFRecordWriter writer(file, /*append=*/false, env);
    writer.write("abc");
    writer.flush(/*sync=*/true);
    writer.close();
  }
  EXPECT_EQ(read_file(file), kAbcFrame);
  EXPECT_EQ(env->log(),
            (std::vector<std::string>{"open b.tfrecord", "append b.tfrecord", "append b.tfrecord",
                                      "append b.tfrecord", "sync b.tfrecord", "close b.tfrecord"}));
  TFRecordWriter appending(file, /*append=*/true, env);
  EXPECT_EQ(appending.offset(), kAbcFrame.size());
  env->fail_from(0);
  EXPECT_THROW(appending.write("more"), UnavailableError);
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
