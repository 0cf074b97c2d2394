// CSV files read by a schema into scalar features per column (RFC 4180 quoting: fields in
// double quotes may hold the delimiter, newlines and doubled quotes).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/io/dataset.h"

namespace cadre::io {

enum class CsvType { kFloat32, kFloat64, kInt32, kInt64, kString };

struct CsvColumn {
  CsvColumn(std::string name, CsvType type = CsvType::kFloat32,
            std::optional<std::string> default_value = std::nullopt)
      : name(std::move(name)), type(type), default_value(std::move(default_value)) {}

  std::string name;
  CsvType type = CsvType::kFloat32;
  // Used for an empty field; when unset, an empty field is an error.
  std::optional<std::string> default_value;
};

// Options for csv_dataset. With `header`, the first record of each file names its columns
// and `columns` picks among them by name, in any order; without, `columns` lists every
// column of the file in order.
struct CsvOptions {
  std::vector<CsvColumn> columns;
  bool header = true;
  char delimiter = ',';
  // A column moved from the features into the labels; empty for none.
  std::string label_column;
  // What the files are read through; null: the real file system.
  std::shared_ptr<Env> env;
};

// One element per record (empty lines skipped): a scalar of the column's type per column,
// strings as uint8 [n]. Throws NotFoundError naming a missing file (when the dataset is
// made); a malformed record is an InvalidArgumentError naming the file, line and column,
// raised by the iterator at that record, a failed read the Env's typed error naming the file.
// Iterator state holds the file and byte offset.
Dataset csv_dataset(std::vector<std::string> filenames, CsvOptions options);

}  // namespace cadre::io
