#include "cadre/io/tfrecord.h"

#include <algorithm>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/masked_crc.h"

namespace cadre::io {
namespace {

constexpr size_t kHeaderBytes = 12;  // length + its CRC
constexpr size_t kFooterBytes = 4;   // the data's CRC
constexpr size_t kReadAheadBytes = 64 * 1024;

void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void header_for(uint64_t length, char* header) {
  put_u64(header, length);
  put_u32(header + 8, mask_crc(crc32c::value(header, 8)));
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out(kHeaderBytes + data.size() + kFooterBytes, '\0');
  header_for(data.size(), out.data());
  std::memcpy(out.data() + kHeaderBytes, data.data(), data.size());
  put_u32(out.data() + kHeaderBytes + data.size(), mask_crc(crc32c::value(data)));
  return out;
}

TFRecordWriter::TFRecordWriter(const std::string& path, bool append,
                               const std::shared_ptr<Env>& env)
    : path_(path), file_((env ? env : posix_env())->new_writable_file(path, append)) {}

TFRecordWriter::~TFRecordWriter() = default;

uint64_t TFRecordWriter::offset() const { return file_ ? file_->size() : closed_size_; }

void TFRecordWriter::write(std::string_view record) {
  if (!file_) throw FailedPreconditionError(str_cat("TFRecord file ", path_, " is closed"));
  char header[kHeaderBytes];
  char footer[kFooterBytes];
  header_for(record.size(), header);
  put_u32(footer, mask_crc(crc32c::value(record)));
  file_->append(std::string_view(header, kHeaderBytes));
  file_->append(record);
  file_->append(std::string_view(footer, kFooterBytes));
}

void TFRecordWriter::flush(bool sync) {
  if (!file_) return;
  if (sync) {
    file_->sync();
  } else {
    file_->flush();
  }
}

void TFRecordWriter::close() {
  if (!file_) return;
  std::unique_ptr<WritableFile> file = std::move(file_);
  closed_size_ = file->size();
  file->close();
}

TFRecordReader::TFRecordReader(const std::string& path, const std::shared_ptr<Env>& env)
    : path_(path), env_(env ? env : posix_env()), file_(env_->new_random_access_file(path)) {}

TFRecordReader::~TFRecordReader() = default;

size_t TFRecordReader::read_exactly(uint64_t position, void* out, size_t n) {
  std::string_view got = file_->read(position, n, static_cast<char*>(out));
  if (!got.empty() && got.data() != out) std::memcpy(out, got.data(), got.size());
  return got.size();
}

size_t TFRecordReader::read_at(uint64_t position, void* out, size_t n) {
  if (position >= window_offset_ && position + n <= window_offset_ + window_.size()) {
    if (n > 0) std::memcpy(out, window_.data() + (position - window_offset_), n);
    return n;
  }
  window_ = {};
  if (n >= kReadAheadBytes) return read_exactly(position, out, n);
  read_ahead_.resize(kReadAheadBytes);
  try {
    window_ = file_->read(position, kReadAheadBytes, read_ahead_.data());
  } catch (const Error&) {
    // Bytes past the ones asked for may be what cannot be read: the error is theirs to
    // report, when a record needs them.
    return read_exactly(position, out, n);
  }
  window_offset_ = position;
  size_t got = std::min(n, window_.size());
  if (got > 0) std::memcpy(out, window_.data(), got);
  return got;
}

std::optional<std::string> TFRecordReader::read() {
  unsigned char header[kHeaderBytes];
  size_t got = read_at(offset_, header, kHeaderBytes);
  if (got == 0) return std::nullopt;
  if (got < kHeaderBytes) {
    throw DataLossError(str_cat("TFRecord file ", path_, " is truncated at byte offset ",
                                offset_ + got, ": the record header at offset ", offset_, " needs ",
                                kHeaderBytes, " bytes, only ", got, " remain"));
  }
  uint64_t length = get_u64(header);
  if (unmask_crc(get_u32(header + 8)) != crc32c::value(header, 8)) {
    throw DataLossError(str_cat("TFRecord file ", path_, " is corrupted at byte offset ", offset_,
                                ": the CRC of the record length does not match"));
  }
  // Check the declared length against the file before allocating for it.
  uint64_t data_offset = offset_ + kHeaderBytes;
  auto fits = [&] { return length <= size_ && data_offset + length + kFooterBytes <= size_; };
  if (!fits()) {
    size_ = env_->file_size(path_);  // the file may have grown
    if (!fits()) {
      throw DataLossError(str_cat("TFRecord file ", path_, " is truncated at byte offset ", size_,
                                  ": the record at offset ", offset_, " declares ", length,
                                  " bytes of data"));
    }
  }
  std::string data(length, '\0');
  unsigned char footer[kFooterBytes];
  got = read_at(data_offset, data.data(), length);
  if (got == length) got += read_at(data_offset + length, footer, kFooterBytes);
  if (got < length + kFooterBytes) {
    throw DataLossError(str_cat("TFRecord file ", path_, " is truncated at byte offset ",
                                data_offset + got, ": the record at offset ", offset_, " declares ",
                                length, " bytes of data"));
  }
  if (unmask_crc(get_u32(footer)) != crc32c::value(data)) {
    throw DataLossError(str_cat("TFRecord file ", path_, " is corrupted at byte offset ",
                                data_offset, ": the CRC of the ", length,
                                "-byte record data does not match"));
  }
  offset_ = data_offset + length + kFooterBytes;
  return data;
}

void TFRecordReader::seek(uint64_t offset) {
  offset_ = offset;
  window_ = {};  // what was read ahead may have changed since
}

namespace {

class TFRecordNode : public FileSourceNode {
 public:
  TFRecordNode(std::vector<std::string> filenames, std::shared_ptr<Env> env)
      : filenames_(std::move(filenames)), env_(std::move(env)) {}
  std::string_view kind() const override { return "tfrecord"; }
  const std::vector<std::string>& files() const override { return filenames_; }
  NodePtr with_files(std::vector<std::string> files) const override {
    return std::make_shared<TFRecordNode>(std::move(files), env_);
  }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext&) const override {
    class It : public IteratorNode {
     public:
      explicit It(const TFRecordNode& node)
          : IteratorNode("tfrecord"), files_(node.filenames_), env_(node.env_) {}
      std::optional<Element> next() override {
        while (file_index_ < files_.size()) {
          if (!reader_) reader_ = std::make_unique<TFRecordReader>(files_[file_index_], env_);
          auto offset = static_cast<int64_t>(reader_->offset());
          if (auto record = reader_->read()) {
            Element e(bytes_tensor(*record));
            e.origin = {static_cast<int64_t>(file_index_), offset};
            return e;
          }
          reader_.reset();
          ++file_index_;
        }
        return std::nullopt;
      }
      void save_state(StateWriter& w) override {
        w.write_int("file_index", static_cast<int64_t>(file_index_));
        w.write_int("offset", reader_ ? static_cast<int64_t>(reader_->offset()) : 0);
        if (file_index_ < files_.size()) w.write_string("file", files_[file_index_]);
      }
      void restore_state(const StateReader& r) override {
        file_index_ = static_cast<size_t>(r.read_int("file_index"));
        reader_.reset();
        if (file_index_ >= files_.size()) return;
        std::string saved = r.read_string("file");
        if (saved != files_[file_index_]) {
          throw InvalidArgumentError(str_cat("tfrecord: the saved state is in file ", saved,
                                             " but file ", file_index_, " is now ",
                                             files_[file_index_]));
        }
        reader_ = std::make_unique<TFRecordReader>(files_[file_index_], env_);
        reader_->seek(static_cast<uint64_t>(r.read_int("offset")));
      }

     private:
      const std::vector<std::string>& files_;
      const std::shared_ptr<Env>& env_;
      size_t file_index_ = 0;
      std::unique_ptr<TFRecordReader> reader_;
    };
    return std::make_unique<It>(*this);
  }

  // Origins are (file index, byte offset) of a record.
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override {
    if (origin.size() != 2 || origin[0] < 0 ||
        origin[0] >= static_cast<int64_t>(filenames_.size()) || origin[1] < 0) {
      throw DataLossError(str_cat("tfrecord: origin [", join(origin),
                                  "] names no record (file index, byte offset)"));
    }
    TFRecordReader reader(filenames_[origin[0]], env_);
    reader.seek(static_cast<uint64_t>(origin[1]));
    std::optional<std::string> record = reader.read();
    if (!record) {
      throw DataLossError(str_cat("tfrecord: ", filenames_[origin[0]],
                                  " has no record at byte offset ", origin[1],
                                  ": has the file changed?"));
    }
    Element e(bytes_tensor(*record));
    e.origin = {origin[0], origin[1]};
    return e;
  }

 private:
  std::vector<std::string> filenames_;
  std::shared_ptr<Env> env_;
};

}  // namespace

Dataset tfrecord_dataset(std::vector<std::string> filenames, std::shared_ptr<Env> env) {
  if (!env) env = posix_env();
  for (const std::string& f : filenames) {
    if (!env->file_exists(f)) throw NotFoundError(str_cat("TFRecord file not found: ", f));
  }
  return Dataset(std::make_shared<TFRecordNode>(std::move(filenames), std::move(env)));
}

}  // namespace cadre::io
