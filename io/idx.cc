#include "cadre/io/idx.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string_view>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 16;

// A file read from its start, chunk after chunk.
class Chunks {
 public:
  Chunks(Env& env, const std::string& path)
      : file_(env.new_random_access_file(path)), scratch_(kChunkBytes, '\0') {}
  // The next chunk, valid until the next call; empty at the end of the file.
  std::string_view next() {
    std::string_view chunk = file_->read(offset_, kChunkBytes, scratch_.data());
    offset_ += chunk.size();
    return chunk;
  }

 private:
  std::unique_ptr<RandomAccessFile> file_;
  std::string scratch_;
  uint64_t offset_ = 0;
};

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// A zlib stream inflating gzip members, ended on every path out.
class GzipInflater {
 public:
  GzipInflater() {
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) {  // 16: a gzip wrapper, not zlib's
      throw ResourceExhaustedError("cannot set up zlib to inflate an IDX file");
    }
  }
  ~GzipInflater() { inflateEnd(&stream_); }
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
};

// Inflates the gzip members that make up the file (gzip allows several, one after another),
// given its first chunk in `input`.
std::vector<unsigned char> inflate_all(Chunks& chunks, std::string_view input,
                                       const std::string& path) {
  GzipInflater inflater;
  z_stream& z = inflater.stream();
  std::vector<unsigned char> out(kChunkBytes);
  size_t size = 0;
  int code = Z_OK;
  bool after_member = false;  // a member has ended, and nothing of another came out yet
  while (true) {
    if (z.avail_in == 0) {
      if (input.empty()) input = chunks.next();
      if (input.empty()) break;
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
      z.avail_in = static_cast<uInt>(input.size());
      input = {};
    }
    if (size == out.size()) out.resize(2 * out.size());
    z.next_out = out.data() + size;
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - size, UINT_MAX));
    uInt room = z.avail_out;
    code = inflate(&z, Z_NO_FLUSH);
    size += room - z.avail_out;
    if (code == Z_STREAM_END) {
      inflateReset(&z);  // another member may follow
      after_member = true;
    } else if (code != Z_OK && code != Z_BUF_ERROR) {
      if (after_member && z.total_out == 0) {
        code = Z_STREAM_END;  // bytes after the last member are ignored, as gzread does
        break;
      }
      throw DataLossError(str_cat("IDX file ", path, " is corrupt after ", size,
                                  " decompressed bytes: ", z.msg ? z.msg : "zlib error"));
    }
  }
  if (code != Z_STREAM_END) {
    throw DataLossError(str_cat("IDX file ", path, " is corrupt after ", size,
                                " decompressed bytes: unexpected end of file"));
  }
  out.resize(size);
  return out;
}

// Reads the whole file through `env`, inflating it when it starts as gzip does.
std::vector<unsigned char> read_all(Env& env, const std::string& path) {
  if (!env.file_exists(path)) throw NotFoundError(str_cat("IDX file not found: ", path));
  Chunks chunks(env, path);
  std::string_view chunk = chunks.next();
  if (is_gzip(chunk)) return inflate_all(chunks, chunk, path);
  std::vector<unsigned char> data;
  for (; !chunk.empty(); chunk = chunks.next()) data.insert(data.end(), chunk.begin(), chunk.end());
  return data;
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path, const std::shared_ptr<Env>& env) {
  std::vector<unsigned char> data = read_all(*(env ? env : posix_env()), path);
  if (data.size() < 4) {
    throw DataLossError(str_cat("IDX file ", path, " is truncated at byte offset ", data.size(),
                                ": the 4-byte header needs 4 bytes"));
  }
  if (data[0] != 0 || data[1] != 0) {
    throw DataLossError(str_cat("IDX file ", path, " has a bad magic number at byte offset 0"));
  }
  DType dtype;
  switch (data[2]) {
    case 0x08:
      dtype = DType::kUInt8;
      break;
    case 0x0C:
      dtype = DType::kInt32;
      break;
    case 0x0D:
      dtype = DType::kFloat32;
      break;
    case 0x0E:
      dtype = DType::kFloat64;
      break;
    default:
      throw DataLossError(str_cat("IDX file ", path, " has unsupported element type 0x", std::hex,
                                  int(data[2]), " at byte offset 2"));
  }
  const size_t element = dtype_size(dtype);
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
    for (size_t b = 0; b < element; ++b)
      dst[i * element + b] = data[header + i * element + element - 1 - b];
  }
  return out;
}

ImagesAndLabels read_mnist(const std::string& directory, Split split,
                           const std::shared_ptr<Env>& env) {
  std::string prefix = directory + (split == Split::kTrain ? "/train" : "/t10k");
  ImagesAndLabels out{read_idx(prefix + "-images-idx3-ubyte.gz", env),
                      read_idx(prefix + "-labels-idx1-ubyte.gz", env)};
  if (out.images.rank() != 3 || out.labels.rank() != 1 ||
      out.images.shape()[0] != out.labels.shape()[0]) {
    throw DataLossError(str_cat("MNIST files in ", directory, " do not match: images ",
                                out.images.shape(), ", labels ", out.labels.shape()));
  }
  return out;
}

}  // namespace cadre::io
