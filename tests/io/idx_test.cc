#include "cadre/io/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "cadre/base/errors.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

class IdxTest : public cadre::testing::TempDirTest {
 protected:
  std::string write(const std::string& name, const std::vector<unsigned char>& bytes, bool gzip) {
    std::string path = this->path(name);
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
    return path;
  }
};

// Header of a 2x3 uint8 tensor, then its bytes.
const std::vector<unsigned char> kMatrix = {0, 0, 0x08, 2, 0, 0, 0, 2, 0,
                                            0, 0, 3,    1, 2, 3, 4, 5, 6};

TEST_F(IdxTest, ReadsPlainAndGzipFiles) {
  for (bool gzip : {false, true}) {
    Tensor t = read_idx(write(gzip ? "m.gz" : "m", kMatrix, gzip));
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.dtype(), DType::kUInt8);
    EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  }
}

TEST_F(IdxTest, ReadsBigEndianInt32) {
  std::vector<unsigned char> bytes = {0, 0, 0x0C, 1, 0,    0,    0,    2,
                                      0, 0, 1,    2, 0xFF, 0xFF, 0xFF, 0xFE};
  EXPECT_EQ(read_idx(write("i", bytes, false)).to_vector<int>(), (std::vector<int>{258, -2}));
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  try {
    read_idx(path("absent.gz"));
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.gz"), std::string::npos);
  }
}

TEST_F(IdxTest, TruncatedFileIsDataLossWithOffset) {
  std::vector<unsigned char> cut(kMatrix.begin(), kMatrix.end() - 2);
  std::string path = write("cut.gz", cut, true);
  try {
    read_idx(path);
    FAIL();
  } catch (const DataLossError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("byte offset 16"), std::string::npos) << message;
  }
  EXPECT_THROW(read_idx(write("magic", {1, 0, 8, 1, 0, 0, 0, 0}, false)), DataLossError);
}

TEST(FashionMnistTest, DebianPackageLoads) {
  const char* dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ImagesAndLabels test = read_mnist(dir, Split::kTest);
  EXPECT_EQ(test.images.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(test.labels.shape(), (Shape{10000}));
  std::vector<int> labels = test.labels.to_vector<int>();
  EXPECT_EQ(*std::max_element(labels.begin(), labels.end()), 9);
}

}  // namespace
}  // namespace cadre::io
