// TFRecord files: a sequence of records, each framed as
//   uint64 length (little-endian) | uint32 masked CRC-32C of the length bytes |
//   data[length] | uint32 masked CRC-32C of the data
// exactly as TensorFlow writes and reads them (uncompressed), so files go both ways.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/io/dataset.h"

namespace cadre::io {

// One record's frame around `data`.
std::string frame_record(std::string_view data);

// Writes records to a file. Not thread-safe.
class TFRecordWriter {
 public:
  // Creates (or truncates) `path` through `env` (the real file system when null); with
  // `append`, keeps what is there and writes after it. Throws NotFoundError /
  // PermissionDeniedError naming the path when it cannot be opened.
  explicit TFRecordWriter(const std::string& path, bool append = false,
                          const std::shared_ptr<Env>& env = nullptr);
  ~TFRecordWriter();  // closes; errors are lost there, so call close() to see them
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  void write(std::string_view record);
  // Hands buffered records to the operating system (readers then see them); with `sync`,
  // also waits until they are on disk (fsync).
  void flush(bool sync = false);
  void close();
  // Bytes in the file so far: the offset of the next record.
  uint64_t offset() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<WritableFile> file_;  // null once closed
  uint64_t closed_size_ = 0;
};

// Reads records of a file in order. Not thread-safe.
class TFRecordReader {
 public:
  // Opens `path` through `env` (the real file system when null). Throws NotFoundError
  // naming the path when it does not exist.
  explicit TFRecordReader(const std::string& path, const std::shared_ptr<Env>& env = nullptr);
  ~TFRecordReader();
  TFRecordReader(const TFRecordReader&) = delete;
  TFRecordReader& operator=(const TFRecordReader&) = delete;

  // The next record, or nullopt at the end of the file. A record cut short or failing its
  // CRC throws DataLossError naming the file and the byte offset of the damage, a failed
  // read the Env's typed error naming the file; either way the reader stays before that
  // record.
  std::optional<std::string> read();
  // Offset of the next record; seek() to an offset that offset() returned resumes there.
  uint64_t offset() const { return offset_; }
  void seek(uint64_t offset);
  const std::string& path() const { return path_; }

 private:
  // Reads n bytes at `position`, or fewer at the end of the file.
  size_t read_at(uint64_t position, void* out, size_t n);
  size_t read_exactly(uint64_t position, void* out, size_t n);

  std::string path_;
  std::shared_ptr<Env> env_;  // asked for the file's size
  std::unique_ptr<RandomAccessFile> file_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;  // the file's size when last looked at
  // Bytes read ahead: small records cost a copy, not a read each.
  std::string read_ahead_;
  std::string_view window_;  // the file's bytes from window_offset_ on
  uint64_t window_offset_ = 0;
};

// A dataset of the records of `filenames`, file after file, as byte-string elements
// (uint8 [n], feature "value"), read through `env` (the real file system when null). Throws
// NotFoundError naming a missing file. Iterator state holds the file index and byte offset.
// To read many files at once, interleave per-file datasets:
//   Dataset::from_strings(files).interleave(
//       [](const Element& f) { return tfrecord_dataset({tensor_bytes(f.value())}); }, 4)
Dataset tfrecord_dataset(std::vector<std::string> filenames, std::shared_ptr<Env> env = nullptr);

}  // namespace cadre::io
