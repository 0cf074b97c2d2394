#include "cadre/io/csv.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <string_view>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"

namespace cadre::io {
namespace {

std::string_view type_name(CsvType type) {
  switch (type) {
    case CsvType::kFloat32:
      return "float32";
    case CsvType::kFloat64:
      return "float64";
    case CsvType::kInt32:
      return "int32";
    case CsvType::kInt64:
      return "int64";
    case CsvType::kString:
      return "string";
  }
  return "?";
}

// Splits a file into records of fields, tracking byte offsets and line numbers. Reads the
// file through an Env in chunks.
class CsvReader {
 public:
  CsvReader(Env& env, const std::string& path, char delimiter)
      : path_(path), delimiter_(delimiter), file_(env.new_random_access_file(path)) {}

  // The fields of the next record; false at the end of the file.
  bool read(std::vector<std::string>& fields) {
    int c;
    do {  // blank lines separate nothing
      c = get();
      if (c == EOF) return false;
      if (c == '\n') ++line_;
    } while (c == '\n' || c == '\r');
    record_line_ = line_;
    fields.clear();
    std::string field;
    while (true) {  // c is the first character of a field
      field.clear();
      if (c == '"') {
        while (true) {
          c = get();
          if (c == EOF) fail("a quoted field is not closed before the end of the file");
          if (c == '"') {
            c = get();
            if (c != '"') break;  // the closing quote; c follows it
          } else if (c == '\n') {
            ++line_;
          }
          field += static_cast<char>(c);
        }
        if (c == '\r') c = get();
        if (c != delimiter_ && c != '\n' && c != EOF) {
          fail("a closing quote must end its field");
        }
      } else {
        while (c != delimiter_ && c != '\n' && c != EOF) {
          field += static_cast<char>(c);
          c = get();
        }
        if (c != delimiter_ && !field.empty() && field.back() == '\r') field.pop_back();
      }
      fields.push_back(field);
      if (c != delimiter_) break;
      c = get();
    }
    if (c == '\n') ++line_;
    return true;
  }

  [[noreturn]] void fail(std::string_view problem) const {
    throw InvalidArgumentError(str_cat("CSV file ", path_, " line ", record_line_, ": ", problem));
  }

  uint64_t offset() const { return offset_; }
  int64_t line() const { return line_; }
  void seek(uint64_t offset, int64_t line) {
    offset_ = offset;
    line_ = line;
    chunk_ = {};
    next_ = 0;
  }

 private:
  static constexpr size_t kChunkBytes = 64 * 1024;

  // The next byte (as getc returns it), or EOF.
  int get() {
    if (next_ == chunk_.size()) {
      if (scratch_.empty()) scratch_.resize(kChunkBytes);
      chunk_ = file_->read(offset_, kChunkBytes, scratch_.data());
      next_ = 0;
      if (chunk_.empty()) return EOF;
    }
    ++offset_;
    return static_cast<unsigned char>(chunk_[next_++]);
  }

  std::string path_;
  char delimiter_;
  std::unique_ptr<RandomAccessFile> file_;
  std::string scratch_;
  std::string_view chunk_;  // read from the file, ending at offset_ + chunk_.size() - next_
  size_t next_ = 0;         // in chunk_
  uint64_t offset_ = 0;
  int64_t line_ = 1;         // of the next character
  int64_t record_line_ = 1;  // where the record being read started
};

template <typename T>
Tensor parse_scalar(const CsvReader& reader, const CsvColumn& column, std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    reader.fail(str_cat("column '", column.name, "' expects ", type_name(column.type), ", got '",
                        text, "'"));
  }
  return Tensor::scalar<T>(value);
}

Tensor parse_field(const CsvReader& reader, const CsvColumn& column, const std::string& field) {
  const std::string* text = &field;
  if (field.empty()) {
    if (!column.default_value) {
      reader.fail(str_cat("column '", column.name, "' is empty and has no default value"));
    }
    text = &*column.default_value;
  }
  switch (column.type) {
    case CsvType::kFloat32:
      return parse_scalar<float>(reader, column, *text);
    case CsvType::kFloat64:
      return parse_scalar<double>(reader, column, *text);
    case CsvType::kInt32:
      return parse_scalar<int32_t>(reader, column, *text);
    case CsvType::kInt64:
      return parse_scalar<int64_t>(reader, column, *text);
    case CsvType::kString:
      return bytes_tensor(*text);
  }
  return Tensor();
}

class CsvNode : public FileSourceNode {
 public:
  CsvNode(std::vector<std::string> filenames, CsvOptions options)
      : filenames_(std::move(filenames)), options_(std::move(options)) {
    if (options_.columns.empty()) throw InvalidArgumentError("csv_dataset: no columns given");
    bool label_found = options_.label_column.empty();
    for (const CsvColumn& c : options_.columns) label_found |= c.name == options_.label_column;
    if (!label_found) {
      throw InvalidArgumentError(str_cat("csv_dataset: label column '", options_.label_column,
                                         "' is not among the columns"));
    }
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "csv"; }
  // Origins are (file index, byte offset, line) of a record.
  bool can_fetch() const override { return true; }
  Element fetch(std::span<const int64_t> origin) const override;
  const std::vector<std::string>& files() const override { return filenames_; }
  NodePtr with_files(std::vector<std::string> files) const override {
    return std::make_shared<CsvNode>(std::move(files), options_);
  }

  std::vector<std::string> filenames_;
  CsvOptions options_;
};

class CsvIterator : public IteratorNode {
 public:
  explicit CsvIterator(const CsvNode& node) : IteratorNode("csv"), node_(node) {}

  std::optional<Element> next() override {
    const CsvOptions& options = node_.options_;
    while (file_index_ < node_.filenames_.size()) {
      if (!reader_) open();
      auto offset = static_cast<int64_t>(reader_->offset());
      int64_t line = reader_->line();
      if (reader_->read(fields_)) {
        if (fields_.size() != expected_fields_) {
          reader_->fail(
              str_cat(fields_.size(), " fields where ", expected_fields_, " were expected"));
        }
        Element e;
        for (size_t i = 0; i < options.columns.size(); ++i) {
          const CsvColumn& column = options.columns[i];
          Tensor value = parse_field(*reader_, column, fields_[positions_[i]]);
          if (column.name == options.label_column) {
            e.labels = std::move(value);
          } else {
            e.features.set(column.name, std::move(value));
          }
        }
        e.origin = {static_cast<int64_t>(file_index_), offset, line};
        return e;
      }
      reader_.reset();
      ++file_index_;
    }
    return std::nullopt;
  }

  void save_state(StateWriter& w) override {
    w.write_int("file_index", static_cast<int64_t>(file_index_));
    w.write_int("offset", reader_ ? static_cast<int64_t>(reader_->offset()) : -1);
    w.write_int("line", reader_ ? reader_->line() : 0);
  }

  void restore_state(const StateReader& r) override {
    seek(r.read_int("file_index"), r.read_int("offset"), r.read_int("line"));
  }

  // To record `offset` (at `line`) of file `file_index`; offset -1: before the file's header.
  void seek(int64_t file_index, int64_t offset, int64_t line) {
    file_index_ = static_cast<size_t>(std::max<int64_t>(file_index, 0));
    reader_.reset();
    if (file_index_ >= node_.filenames_.size() || offset < 0) return;
    open();  // reads the header, which maps the columns
    reader_->seek(static_cast<uint64_t>(offset), line);
  }

 private:
  void open() {
    const CsvOptions& options = node_.options_;
    const std::string& path = node_.filenames_[file_index_];
    reader_ = std::make_unique<CsvReader>(*options.env, path, options.delimiter);
    positions_.clear();
    if (!options.header) {
      expected_fields_ = options.columns.size();
      for (size_t i = 0; i < options.columns.size(); ++i) positions_.push_back(i);
      return;
    }
    std::vector<std::string> header;
    if (!reader_->read(header)) {
      throw InvalidArgumentError(str_cat("CSV file ", path, " is empty; a header was expected"));
    }
    expected_fields_ = header.size();
    for (const CsvColumn& column : options.columns) {
      auto it = std::find(header.begin(), header.end(), column.name);
      if (it == header.end()) {
        throw InvalidArgumentError(str_cat("CSV file ", path, " has no column '", column.name,
                                           "'; its header has [", join(header), "]"));
      }
      positions_.push_back(static_cast<size_t>(it - header.begin()));
    }
  }

  const CsvNode& node_;
  size_t file_index_ = 0;
  std::unique_ptr<CsvReader> reader_;
  std::vector<size_t> positions_;  // file field index of each schema column
  size_t expected_fields_ = 0;
  std::vector<std::string> fields_;
};

std::unique_ptr<IteratorNode> CsvNode::make_iterator(const IteratorContext&) const {
  return std::make_unique<CsvIterator>(*this);
}

Element CsvNode::fetch(std::span<const int64_t> origin) const {
  auto missing = [&] {
    return DataLossError(str_cat("csv: no record at origin [", join(origin),
                                 "] (file index, byte offset, line): has the file changed?"));
  };
  if (origin.size() != 3 || origin[0] < 0 || origin[0] >= static_cast<int64_t>(filenames_.size()) ||
      origin[1] < 0) {
    throw missing();
  }
  CsvIterator it(*this);
  it.seek(origin[0], origin[1], origin[2]);
  std::optional<Element> e = it.next();
  if (!e || !std::equal(e->origin.begin(), e->origin.end(), origin.begin(), origin.end())) {
    throw missing();
  }
  return std::move(*e);
}

}  // namespace

Dataset csv_dataset(std::vector<std::string> filenames, CsvOptions options) {
  if (!options.env) options.env = posix_env();
  for (const std::string& f : filenames) {
    if (!options.env->file_exists(f)) throw NotFoundError(str_cat("CSV file not found: ", f));
  }
  return Dataset(std::make_shared<CsvNode>(std::move(filenames), std::move(options)));
}

}  // namespace cadre::io
