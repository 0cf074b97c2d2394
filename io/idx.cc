#include "cadre/io/idx.h"

#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

// Reads the whole (possibly gzip-compressed) file.
std::vector<unsigned char> read_all(const std::string& path) {
  if (!std::filesystem::exists(path)) throw NotFoundError(str_cat("IDX file not found: ", path));
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw NotFoundError(str_cat("cannot open IDX file ", path, ": ", std::strerror(errno)));
  }
  std::vector<unsigned char> data;
  std::array<unsigned char, 1 << 16> chunk;
  while (true) {
    int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      throw DataLossError(str_cat("IDX file ", path, " is corrupt after ", data.size(),
                                  " decompressed bytes: ", message));
    }
    if (n == 0) break;
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
  gzclose(file);
  return data;
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::vector<unsigned char> data = read_all(path);
  if (data.size() < 4) {
    throw DataLossError(str_cat("IDX file ", path, " is truncated at byte offset ", data.size(),
                                ": the 4-byte header needs 4 bytes"));
  }
  if (data[0] != 0 || data[1] != 0) {
    throw DataLossError(str_cat("IDX file ", path, " has a bad magic number at byte offset 0"));
  }
  DType dtype;
  size_t element = 0;
  switch (data[2]) {
    case 0x08: dtype = DType::kUInt8; element = 1; break;
    case 0x0C: dtype = DType::kInt32; element = 4; break;
    case 0x0D: dtype = DType::kFloat32; element = 4; break;
    case 0x0E: dtype = DType::kFloat64; element = 8; break;
    default:
      throw DataLossError(str_cat("IDX file ", path, " has unsupported element type 0x",
                                  std::hex, int(data[2]), " at byte offset 2"));
  }
  int rank = data[3];
  size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (rank > Shape::kMaxRank || data.size() < header) {
    throw DataLossError(str_cat("IDX file ", path, " is truncated at byte offset ", data.size(),
                                ": the header declares ", rank, " dimensions"));
  }
  Shape shape;
  for (int d = 0; d < rank; ++d) shape.push_back(big_endian(&data[4 + 4 * d]));
  size_t expected = header + static_cast<size_t>(shape.num_elements()) * element;
  if (data.size() < expected) {
    throw DataLossError(str_cat("IDX file ", path, " is truncated at byte offset ", data.size(),
                                ": shape ", shape, " needs ", expected, " bytes"));
  }
  Tensor out = Tensor::empty(shape, dtype, Device::cpu(0));
  unsigned char* dst = static_cast<unsigned char*>(out.raw_data());
  // IDX stores multi-byte elements big-endian.
  for (size_t i = 0; i < static_cast<size_t>(shape.num_elements()); ++i) {
    for (size_t b = 0; b < element; ++b) dst[i * element + b] = data[header + i * element + element - 1 - b];
  }
  return out;
}

ImagesAndLabels read_mnist(const std::string& directory, Split split) {
  std::string prefix = directory + (split == Split::kTrain ? "/train" : "/t10k");
  ImagesAndLabels out{read_idx(prefix + "-images-idx3-ubyte.gz"),
                      read_idx(prefix + "-labels-idx1-ubyte.gz")};
  if (out.images.rank() != 3 || out.labels.rank() != 1 ||
      out.images.shape()[0] != out.labels.shape()[0]) {
    throw DataLossError(str_cat("MNIST files in ", directory, " do not match: images ",
                                out.images.shape(), ", labels ", out.labels.shape()));
  }
  return out;
}

}  // namespace cadre::io
