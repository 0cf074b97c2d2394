#include "checkpoint/manifest.h"

#include <glog/logging.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "checkpoint/format.h"
#include "checkpoint/hdf5_util.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

// Each logical name's slices, sorted by first row.
std::map<std::string, std::vector<std::pair<size_t, const PartSlice*>>> slices_by_name(
    const CheckpointData& data) {
  std::map<std::string, std::vector<std::pair<size_t, const PartSlice*>>> by_name;
  for (size_t p = 0; p < data.parts.size(); ++p) {
    for (const PartSlice& slice : data.parts[p].slices) by_name[slice.name].emplace_back(p, &slice);
  }
  for (auto& [name, slices] : by_name) {
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.second->first_row < b.second->first_row;
    });
  }
  return by_name;
}

std::string slices_problem(const std::string& name,
                           const std::vector<std::pair<size_t, const PartSlice*>>& slices) {
  const PartSlice& first = *slices.front().second;
  int64_t rows = first.shape.rank() == 0 ? 1 : first.shape[0];
  int64_t next = 0;
  for (const auto& [part, slice] : slices) {
    if (slice->dtype != first.dtype || slice->shape != first.shape ||
        slice->slot_of != first.slot_of) {
      return str_cat("'", name, "' is described as ", first.dtype, " ", first.shape, " and as ",
                     slice->dtype, " ", slice->shape);
    }
    if (slice->first_row != next || slice->rows <= 0) {
      return str_cat("the slices of '", name, "' do not cover its rows once in order (row ", next,
                     " expected, a slice of ", slice->rows, " from ", slice->first_row, " found)");
    }
    next += slice->rows;
  }
  if (next != rows)
    return str_cat("the slices of '", name, "' cover ", next, " of ", rows, " rows");
  return "";
}

void write_table(hid_t group, AttributeWriter& attributes, const std::string& name,
                 const std::vector<std::pair<size_t, const PartSlice*>>& slices,
                 const std::string& context) {
  std::vector<int64_t> table;
  for (const auto& [part, slice] : slices) {
    table.insert(table.end(), {static_cast<int64_t>(part), slice->first_row, slice->rows});
  }
  Handle space = make_dataspace(Shape{static_cast<int64_t>(slices.size()), 3});
  Handle lcpl = checked(H5Pcreate(H5P_LINK_CREATE), ErrorCode::kInternal, "H5Pcreate");
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle dataset = checked(H5Dcreate2(group, name.c_str(), H5T_STD_I64LE, space.get(), lcpl.get(),
                                      H5P_DEFAULT, H5P_DEFAULT),
                           ErrorCode::kUnavailable, str_cat(context, ": cannot create ", name));
  if (H5Dwrite(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, table.data()) < 0) {
    throw_hdf5(ErrorCode::kUnavailable, str_cat(context, ": cannot write ", name));
  }
  uint32_t crc = crc32c::value(table.data(), table.size() * sizeof(int64_t));
  attributes.create(dataset.get(), format::kChecksumAttribute, H5T_STD_U32LE, &crc);
  attributes.write_string(dataset.get(), format::kDtypeAttribute, "int64");
  const PartSlice& first = *slices.front().second;
  attributes.write_string(dataset.get(), kVariableDtypeAttribute,
                          std::string(dtype_name(first.dtype)));
  attributes.write_string(dataset.get(), kVariableShapeAttribute, shape_text(first.shape));
  if (!first.slot_of.empty()) {
    attributes.write_string(dataset.get(), format::kSlotOfAttribute, first.slot_of);
  }
}

}  // namespace

void check_parts(const CheckpointData& data) {
  std::vector<std::string> problems;
  auto by_name = slices_by_name(data);
  for (const auto& [name, slices] : by_name) {
    try {
      check_name("variable", name);
    } catch (const InvalidArgumentError& error) {
      problems.push_back(error.what());
    }
    if (data.variables.count(name) || data.partitioned_variables.count(name)) {
      problems.push_back(str_cat("'", name, "' is both in a part and in the chief's own data"));
    }
    std::string problem = slices_problem(name, slices);
    if (!problem.empty()) problems.push_back(problem);
    const std::string& variable = slices.front().second->slot_of;
    if (!variable.empty() && !by_name.count(variable) && !data.variables.count(variable)) {
      problems.push_back(
          str_cat("slot '", name, "' belongs to '", variable, "', which is not saved"));
    }
  }
  for (const CheckpointPart& part : data.parts) {
    if (part.file_name.empty() || part.file_name.find('/') != std::string::npos || !part.wait) {
      problems.push_back(
          str_cat("a part named '", part.file_name, "' (a file name and a wait are needed)"));
    }
  }
  if (!problems.empty()) {
    throw InvalidArgumentError(str_cat("cannot save sharded checkpoint: ", join(problems, "; ")));
  }
}

void write_sharded_checkpoint_file(const std::string& path, const CheckpointData& data,
                                   const std::vector<WrittenPart>& written,
                                   const WriteOptions& options) {
  check_parts(data);
  CHECK_EQ(written.size(), data.parts.size());
  write_checkpoint_file(path, data, options);
  std::string context = str_cat("checkpoint ", path);
  quiet_hdf5();
  Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), ErrorCode::kInternal, "H5Pcreate");
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  Handle file = checked(H5Fopen(path.c_str(), H5F_ACC_RDWR, access.get()), ErrorCode::kUnavailable,
                        str_cat(context, ": cannot reopen"));
  {
    Handle version = checked(H5Aopen(file.get(), format::kFormatVersionAttribute, H5P_DEFAULT),
                             ErrorCode::kUnavailable, context);
    int64_t sharded = format::kShardedFormatVersion;
    if (H5Awrite(version.get(), H5T_NATIVE_INT64, &sharded) < 0) {
      throw_hdf5(ErrorCode::kUnavailable, str_cat(context, ": cannot write the format version"));
    }
    AttributeWriter attributes;
    Handle parts = create_groups(file.get(), kParts, context);
    for (size_t k = 0; k < data.parts.size(); ++k) {
      Handle group = create_groups(parts.get(), std::to_string(k), context);
      attributes.write_string(group.get(), kFileAttribute, data.parts[k].file_name);
      attributes.write_int64(group.get(), kBytesAttribute, static_cast<int64_t>(written[k].bytes));
      attributes.create(group.get(), format::kChecksumAttribute, H5T_STD_U32LE, &written[k].crc32c);
    }
    Handle sharded_group = create_groups(file.get(), kSharded, context);
    for (const auto& [name, slices] : slices_by_name(data)) {
      const char* tree =
          slices.front().second->slot_of.empty() ? format::kVariables : format::kSlots;
      write_table(sharded_group.get(), attributes, str_cat(tree, "/", name), slices, context);
    }
  }
  if (!file.close()) throw_hdf5(ErrorCode::kUnavailable, str_cat("cannot finish ", context));
}

std::string shape_text(const Shape& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return str_cat("[", join(dims, ", "), "]");
}

Shape parse_shape_text(const std::string& text, const std::string& context) {
  auto bad = [&] { return DataLossError(str_cat(context, ": '", text, "' is not a shape")); };
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') throw bad();
  std::vector<int64_t> dims;
  std::string inner = text.substr(1, text.size() - 2);
  size_t at = 0;
  while (at < inner.size()) {
    size_t end = inner.find(',', at);
    if (end == std::string::npos) end = inner.size();
    std::string item = inner.substr(at, end - at);
    item.erase(0, item.find_first_not_of(' '));
    if (item.empty() || item.size() > 18 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      throw bad();
    }
    dims.push_back(std::stoll(item));
    at = end + 1;
  }
  if (dims.size() > 8) throw bad();
  return Shape(dims);
}

}  // namespace cadre::checkpoint::internal
