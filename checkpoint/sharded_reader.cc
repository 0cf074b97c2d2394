#include "checkpoint/sharded_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "checkpoint/format.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/manifest.h"
#include "checkpoint/parts.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

std::vector<std::string> child_names(hid_t group, const std::string& context) {
  std::vector<std::string> names;
  H5G_info_t info;
  if (H5Gget_info(group, &info) < 0) throw_hdf5(ErrorCode::kDataLoss, context);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[64];
    ssize_t size = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name),
                                      H5P_DEFAULT);
    if (size < 0 || size >= static_cast<ssize_t>(sizeof(name))) {
      throw DataLossError(str_cat(context, ": a part with a bad name"));
    }
    names.emplace_back(name, static_cast<size_t>(size));
  }
  return names;
}

// Whether this thread is opening a part: a part is a version-1 file, and a manifest naming
// itself or another manifest as a part (a damaged or hostile file) must not recurse.
thread_local bool opening_part = false;

}  // namespace

ShardedLayout::ShardedLayout(hid_t file, const std::string& path,
                             std::map<std::string, VariableInfo>* variables)
    : path_(path) {
  if (opening_part) {
    throw DataLossError(str_cat(context(), ": a part of a sharded checkpoint that is itself one"));
  }
  load_parts(file);
  load_tables(file, format::kVariables, variables);
  load_tables(file, format::kSlots, variables);
}

ShardedLayout::~ShardedLayout() = default;

std::string ShardedLayout::context() const { return str_cat("checkpoint ", path_); }

void ShardedLayout::load_parts(hid_t file) {
  if (H5Lexists(file, kParts, H5P_DEFAULT) <= 0) return;
  Handle parts = checked(H5Gopen2(file, kParts, H5P_DEFAULT), ErrorCode::kDataLoss, context());
  std::vector<std::string> names = child_names(parts.get(), context());
  for (size_t k = 0; k < names.size(); ++k) parts_.push_back(std::make_unique<Part>());
  std::string dir = dir_name(path_);
  for (size_t k = 0; k < names.size(); ++k) {
    std::string where = str_cat(context(), ", part ", k);
    Handle group = checked(H5Gopen2(parts.get(), std::to_string(k).c_str(), H5P_DEFAULT),
                           ErrorCode::kDataLoss, str_cat(where, ": missing from the manifest"));
    Part& part = *parts_[k];
    part.file = read_string_attribute(group.get(), kFileAttribute, where).value_or("");
    std::optional<int64_t> bytes = read_int64_attribute(group.get(), kBytesAttribute, where);
    std::optional<uint32_t> crc =
        read_uint32_attribute(group.get(), format::kChecksumAttribute, where);
    if (part.file.empty() || part.file.find('/') != std::string::npos || !bytes || !crc) {
      throw DataLossError(str_cat(where, ": the manifest's entry is damaged"));
    }
    part.bytes = static_cast<uint64_t>(*bytes);
    part.crc32c = *crc;
    std::string part_path = join_path(dir, part.file);
    struct stat info;
    if (::stat(part_path.c_str(), &info) != 0) {
      throw DataLossError(str_cat(context(), ": part ", part.file, " is missing"));
    }
    if (static_cast<uint64_t>(info.st_size) != part.bytes) {
      throw DataLossError(str_cat(context(), ": part ", part.file, " is ", info.st_size,
                                  " bytes; the manifest says ", part.bytes,
                                  " (damaged, or written by another save)"));
    }
    opening_part = true;
    try {
      part.reader = CheckpointReader::open(part_path);
    } catch (const Error& error) {
      opening_part = false;
      throw DataLossError(str_cat(context(), ": part ", part.file, ": ", error.what()));
    }
    opening_part = false;
  }
}

void ShardedLayout::load_tables(hid_t file, const char* tree,
                                std::map<std::string, VariableInfo>* variables) {
  std::string group_name = str_cat(kSharded, "/", tree);
  if (H5Lexists(file, kSharded, H5P_DEFAULT) <= 0 ||
      H5Lexists(file, group_name.c_str(), H5P_DEFAULT) <= 0) {
    return;
  }
  Handle group =
      checked(H5Gopen2(file, group_name.c_str(), H5P_DEFAULT), ErrorCode::kDataLoss, context());
  for (const std::string& name : list_datasets(group.get(), context())) {
    std::string where = str_cat(context(), ", dataset ", group_name, "/", name);
    Handle table =
        checked(H5Dopen2(group.get(), name.c_str(), H5P_DEFAULT), ErrorCode::kDataLoss, where);
    Handle space = checked(H5Dget_space(table.get()), ErrorCode::kDataLoss, where);
    Shape shape = dataspace_shape(space.get(), where);
    if (shape.rank() != 2 || shape[1] != 3 || shape[0] < 1 || shape[0] > (int64_t{1} << 24)) {
      throw DataLossError(str_cat(where, ": not a table of slices"));
    }
    std::vector<int64_t> rows(static_cast<size_t>(shape.num_elements()));
    if (H5Dread(table.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0) {
      throw_hdf5(ErrorCode::kDataLoss, str_cat(where, ": cannot read"));
    }
    std::optional<uint32_t> crc =
        read_uint32_attribute(table.get(), format::kChecksumAttribute, where);
    if (!crc || *crc != crc32c::value(rows.data(), rows.size() * sizeof(int64_t))) {
      throw DataLossError(str_cat(where, ": checksum mismatch: the file is damaged"));
    }
    VariableInfo info;
    info.dtype = parse_dtype(
        read_string_attribute(table.get(), kVariableDtypeAttribute, where).value_or("?"));
    info.shape = parse_shape_text(
        read_string_attribute(table.get(), kVariableShapeAttribute, where).value_or(""), where);
    info.slot_of = read_string_attribute(table.get(), format::kSlotOfAttribute, where).value_or("");
    std::vector<Slice>& slices = slices_[name];
    int64_t next = 0;
    for (size_t i = 0; i < rows.size(); i += 3) {
      Slice s{static_cast<size_t>(rows[i]), rows[i + 1], rows[i + 2]};
      if (rows[i] < 0 || s.part >= parts_.size() || s.first_row != next || s.rows <= 0) {
        throw DataLossError(str_cat(where, ": the slices do not cover the rows in order"));
      }
      next += s.rows;
      slices.push_back(s);
    }
    if (next != (info.shape.rank() == 0 ? 1 : info.shape[0]) ||
        !variables->emplace(name, info).second) {
      throw DataLossError(str_cat(where, ": the slices do not match the variable"));
    }
  }
}

void ShardedLayout::read(const std::string& name, const VariableInfo& info,
                         const std::vector<std::pair<int64_t, Tensor>>& pieces, bool verify) const {
  const std::vector<Slice>& slices = slices_.at(name);
  if (info.shape.rank() == 0) {
    const Part& part = *parts_[slices.front().part];
    if (verify) verify_part(part);
    for (const auto& [first_row, tensor] : pieces) {
      part.reader->read_into(part_dataset_name(name, 0), tensor, verify);
    }
    return;
  }
  for (const Slice& s : slices) {
    // The pieces' rows within this slice, as rows of the part's dataset.
    std::vector<std::pair<int64_t, Tensor>> within;
    for (const auto& [first_row, tensor] : pieces) {
      int64_t begin = std::max(first_row, s.first_row);
      int64_t end = std::min(first_row + tensor.dim(0), s.first_row + s.rows);
      if (begin >= end) continue;
      within.emplace_back(begin - s.first_row, tensor.slice(0, begin - first_row, end - first_row));
    }
    if (within.empty()) continue;
    const Part& part = *parts_[s.part];
    if (verify) verify_part(part);
    part.reader->read_partitions_into(part_dataset_name(name, s.first_row), within, verify);
  }
}

std::string ShardedLayout::part_problem(const Part& part) const {
  try {
    WrittenPart found = file_checksum(join_path(dir_name(path_), part.file));
    if (found.bytes == part.bytes && found.crc32c == part.crc32c) return "";
    return str_cat("checksum mismatch (manifest ", hex32(part.crc32c), ", ", part.bytes,
                   " bytes; file ", hex32(found.crc32c), ", ", found.bytes,
                   " bytes): the part is damaged");
  } catch (const Error& error) {
    return error.what();
  }
}

void ShardedLayout::verify_part(const Part& part) const {
  std::call_once(part.verified, [&] {
    std::string problem = part_problem(part);
    if (!problem.empty()) {
      throw DataLossError(str_cat(context(), ": part ", part.file, ": ", problem));
    }
  });
}

std::vector<DatasetProblem> ShardedLayout::verify() const {
  std::vector<DatasetProblem> problems;
  for (const auto& part : parts_) {
    std::string problem = part_problem(*part);
    if (!problem.empty()) problems.push_back({str_cat("part ", part->file), problem});
  }
  return problems;
}

void ShardedLayout::add_sizes(CheckpointSizes* sizes) const {
  for (const auto& part : parts_) {
    CheckpointSizes of_part = part->reader->sizes();
    sizes->file += of_part.file;
    sizes->variables += of_part.variables;
    sizes->slots += of_part.slots;
  }
}

}  // namespace cadre::checkpoint::internal
