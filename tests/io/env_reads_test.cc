// The io readers read their files through an Env: over a FaultEnv that fails the reads of
// one file past a byte offset, each yields what lies before and then the Env's typed error
// naming the file; and reading through the Env changes nothing of what they read.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/io/csv.h"
#include "cadre/io/event_file.h"
#include "cadre/io/idx.h"
#include "cadre/io/tfrecord.h"
#include "tests/support/fault_env.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

using testing::FaultEnv;

// Runs `call`, expecting the UnavailableError of an injected read failure naming `path`.
template <typename F>
void expect_read_error_naming(const F& call, const std::string& path) {
  try {
    call();
    ADD_FAILURE() << "expected a read error naming " << path;
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// `bytes` gzip-compressed as one member.
std::string gzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// An IDX file of `n` uint8 values i * 7 (mod 256), shape [n].
std::string idx_bytes(uint32_t n) {
  std::string out = {0,
                     0,
                     0x08,
                     1,
                     static_cast<char>(n >> 24),
                     static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8),
                     static_cast<char>(n)};
  for (uint32_t i = 0; i < n; ++i) out.push_back(static_cast<char>(i * 7));
  return out;
}

class EnvReadsTest : public cadre::testing::TempDirTest {
 protected:
  std::shared_ptr<FaultEnv> env_ = std::make_shared<FaultEnv>();
};

TEST_F(EnvReadsTest, TFRecordReaderFailsWhereTheReadFailsAndCanGoOnAfter) {
  std::string file = path("r.tfrecord");
  {
    TFRecordWriter writer(file);
    writer.write("first");
    writer.write("second");
    writer.close();
  }
  TFRecordReader reader(file, env_);
  env_->fail_reads("r.tfrecord", frame_record("first").size() + 3);
  EXPECT_EQ(reader.read(), "first");
  EXPECT_GT(env_->reads(), 0);
  uint64_t second = reader.offset();
  expect_read_error_naming([&] { reader.read(); }, file);
  EXPECT_EQ(reader.offset(), second);  // still before the record it could not read
  env_->fail_reads("");
  EXPECT_EQ(reader.read(), "second");
  EXPECT_EQ(reader.read(), std::nullopt);
}

TEST_F(EnvReadsTest, TFRecordReaderReadsAheadOverRecordsOfEverySize) {
  std::string file = path("sizes.tfrecord");
  std::vector<std::string> written;
  {
    TFRecordWriter writer(file);
    for (size_t size : {0, 1, 100, 65'000, 65'536, 65'537, 200'000, 7, 70'000, 3}) {
      written.push_back(std::string(size, static_cast<char>('a' + written.size())));
      writer.write(written.back());
    }
    for (int i = 0; i < 2000; ++i) writer.write(std::string(100, static_cast<char>(i)));
  }
  TFRecordReader reader(file, env_);
  for (const std::string& record : written) ASSERT_EQ(reader.read(), record);
  int reads = env_->reads();
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(reader.read(), std::string(100, static_cast<char>(i)));
  EXPECT_EQ(reader.read(), std::nullopt);
  EXPECT_LT(env_->reads() - reads, 10);  // 2000 small records, read 64 KiB at a time
  reader.seek(0);
  EXPECT_EQ(reader.read(), "");
}

TEST_F(EnvReadsTest, TFRecordDatasetsEventFilesAndTheFileCacheReadThroughTheirEnv) {
  std::string file = path("d.tfrecord");
  {
    TFRecordWriter writer(file);
    for (int i = 0; i < 3; ++i) writer.write(std::string(100, static_cast<char>('a' + i)));
  }
  env_->fail_reads("d.tfrecord", 200);  // in the second record
  Iterator it = tfrecord_dataset({file}, env_).make_iterator();
  EXPECT_TRUE(it.next());
  expect_read_error_naming([&] { it.next(); }, file);
  env_->fail_reads("d.tfrecord");
  expect_read_error_naming([&] { read_event_file(file, env_); }, file);
  EXPECT_THROW(tfrecord_dataset({path("absent")}, env_), NotFoundError);

  std::string cache = path("cache");
  Dataset cached = Dataset::range(5).cache(cache, env_);
  int elements = 0;
  for (Iterator writing = cached.make_iterator(); writing.next();) ++elements;
  EXPECT_EQ(elements, 5);
  env_->fail_reads("cache");
  expect_read_error_naming([&] { cached.make_iterator().next(); }, cache);
}

TEST_F(EnvReadsTest, CsvReadsInChunksAndFailsWhereTheReadFails) {
  // Over two 64 KiB chunks, with a quoted field that spans a chunk boundary.
  std::string text = "id,note\n";
  int rows = 0;
  while (text.size() < 70'000) text += std::to_string(rows++) + ",plain\n";
  text += std::to_string(rows++) + ",\"" + std::string(70'000, 'q') + "\"\n";
  text += std::to_string(rows++) + ",last\n";
  std::string file = write_file("big.csv", text);
  CsvOptions options;
  options.columns = {{"id", CsvType::kInt64}, {"note", CsvType::kString}};
  options.env = env_;
  std::vector<int64_t> ids;
  Iterator it = csv_dataset({file}, options).make_iterator();
  while (auto e = it.next()) ids.push_back(e->features.at("id").item<int64_t>());
  ASSERT_EQ(ids.size(), static_cast<size_t>(rows));
  EXPECT_EQ(ids.back(), rows - 1);

  env_->fail_reads("big.csv", 100'000);  // in the second chunk
  Iterator failing = csv_dataset({file}, options).make_iterator();
  int before = 0;
  expect_read_error_naming(
      [&] {
        while (failing.next()) ++before;
      },
      file);
  EXPECT_GT(before, 100);
}

TEST_F(EnvReadsTest, IdxReadsPlainAndGzipThroughTheEnvAndFailsWhereTheReadFails) {
  std::string plain = idx_bytes(200'000);  // more than one 64 KiB chunk either way
  for (bool compressed : {false, true}) {
    std::string name = compressed ? "v.gz" : "v";
    std::string bytes = compressed ? gzip(plain) : plain;
    std::string file = write_file(name, bytes);
    env_->fail_reads("");
    Tensor t = read_idx(file, env_);
    ASSERT_EQ(t.shape(), (Shape{200'000}));
    EXPECT_EQ(t.to_vector<int>()[199'999], (199'999 * 7) % 256);
    env_->fail_reads(name, bytes.size() / 2);
    expect_read_error_naming([&] { read_idx(file, env_); }, file);
  }
  EXPECT_THROW(read_idx(path("absent.gz"), env_), NotFoundError);
}

TEST_F(EnvReadsTest, GzipMembersFollowingEachOtherAreOneFileAndTrailingBytesAreIgnored) {
  std::string plain = idx_bytes(1000);
  std::string file = write_file(
      "two.gz", gzip(plain.substr(0, 300)) + gzip(plain.substr(300)) + std::string(5, '\0'));
  EXPECT_EQ(read_idx(file, env_).to_vector<int>(),
            read_idx(write_file("p", plain)).to_vector<int>());

  std::string whole = gzip(plain);
  std::string cut = write_file("cut.gz", whole.substr(0, whole.size() / 2));
  try {
    read_idx(cut, env_);
    FAIL() << "a cut gzip file was read";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
  }
}

TEST_F(EnvReadsTest, MnistReadsBothFilesThroughTheEnv) {
  std::string images = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4};
  std::string labels = {0, 0, 0x08, 1, 0, 0, 0, 2, 7, 9};
  write_file("t10k-images-idx3-ubyte.gz", gzip(images));
  std::string labels_file = write_file("t10k-labels-idx1-ubyte.gz", gzip(labels));
  ImagesAndLabels read = read_mnist(dir(), Split::kTest, env_);
  EXPECT_EQ(read.images.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(read.labels.to_vector<int>(), (std::vector<int>{7, 9}));
  env_->fail_reads("t10k-labels-idx1-ubyte.gz");
  expect_read_error_naming([&] { read_mnist(dir(), Split::kTest, env_); }, labels_file);
}

}  // namespace
}  // namespace cadre::io
