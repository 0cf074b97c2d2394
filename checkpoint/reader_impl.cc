#include "checkpoint/reader_impl.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cadre/base/errors.h"
#include "checkpoint/format.h"
#include "checkpoint/row_reader.h"
#include "checkpoint/superblock.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {

using internal::checked;

namespace {

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

int64_t rows_of(const Shape& shape) { return shape.rank() == 0 ? 1 : shape[0]; }

}  // namespace

std::string CheckpointReader::Impl::context(const std::string& dataset) const {
  return str_cat("checkpoint ", path, ", dataset ", dataset);
}

Handle CheckpointReader::Impl::open_dataset(const std::string& dataset) const {
  internal::quiet_hdf5();
  return checked(H5Dopen2(file.get(), dataset.c_str(), H5P_DEFAULT), ErrorCode::kDataLoss,
                 str_cat(context(dataset), ": cannot open"));
}

uint32_t CheckpointReader::Impl::stored_checksum(hid_t dataset, const std::string& name) const {
  std::optional<uint32_t> crc =
      internal::read_uint32_attribute(dataset, format::kChecksumAttribute, context(name));
  if (!crc) throw DataLossError(str_cat(context(name), ": has no crc32c attribute"));
  return *crc;
}

void CheckpointReader::Impl::check_checksum(hid_t dataset, const std::string& name,
                                            uint32_t computed) const {
  uint32_t stored = stored_checksum(dataset, name);
  if (stored != computed) {
    throw DataLossError(str_cat(context(name), ": checksum mismatch (stored ", hex(stored),
                                ", computed ", hex(computed), "): the file is damaged"));
  }
}

void CheckpointReader::Impl::read_pieces(const std::string& name, const VariableInfo& info,
                                         const std::vector<std::pair<int64_t, Tensor>>& pieces,
                                         bool verify) const {
  const Shape& shape = info.shape;
  Handle dataset = open_dataset(name);
  Handle memory_type = internal::hdf5_type_for(info.dtype);
  internal::RowReader rows(file.get(), dataset.get(), memory_type.get(), shape, context(name));
  const size_t row_bytes = rows.row_bytes();
  uint32_t crc = 0;
  if (row_bytes > 0) {
    const int64_t block_rows = std::max<int64_t>(1, static_cast<int64_t>(block_bytes / row_bytes));
    struct Piece {
      int64_t begin, end;
      Tensor tensor;
      bool direct;
    };
    std::vector<Piece> spans;
    int64_t begin = rows.rows(), end = 0;
    for (const auto& [first_row, tensor] : pieces) {
      int64_t count = rows_of(tensor.shape());
      bool direct =
          tensor.device().is_cpu() && tensor.is_contiguous() && tensor.dtype() == info.dtype;
      spans.push_back({first_row, first_row + count, tensor, direct});
      begin = std::min(begin, first_row);
      end = std::max(end, first_row + count);
    }
    if (verify) begin = 0, end = rows.rows();
    // Blocks that go straight into a destination are read in runs, two threads at a time;
    // the others one at a time through a staging buffer.
    std::vector<internal::RowReader::Block> run;
    auto flush = [&] {
      std::vector<uint32_t> crcs = rows.read(run, verify);
      for (size_t i = 0; i < crcs.size(); ++i) {
        crc = crc32c::combine(crc, crcs[i],
                              static_cast<uint64_t>(run[i].end - run[i].begin) * row_bytes);
      }
      run.clear();
    };
    Tensor staging;
    for (int64_t b0 = begin; b0 < end; b0 += block_rows) {
      int64_t b1 = std::min(end, b0 + block_rows);
      void* target = nullptr;
      for (const Piece& piece : spans) {
        if (piece.direct && piece.begin <= b0 && b1 <= piece.end) {
          target = static_cast<char*>(piece.tensor.raw_data()) + (b0 - piece.begin) * row_bytes;
        }
      }
      if (target != nullptr) {
        run.push_back({b0, b1, target});
        continue;
      }
      flush();
      if (!staging.defined()) {
        Shape block_shape = shape;
        if (shape.rank() > 0) block_shape.set_dim(0, std::min(block_rows, rows.rows()));
        staging = Tensor::empty(block_shape, info.dtype, Device::cpu());
      }
      run.push_back({b0, b1, staging.raw_data()});
      flush();
      for (const Piece& piece : spans) {
        int64_t o0 = std::max(b0, piece.begin), o1 = std::min(b1, piece.end);
        if (o0 < o1)
          copy_rows(staging, b0, o0, o1, piece.begin, piece.tensor, row_bytes, piece.direct);
      }
    }
    flush();
  }
  if (verify) check_checksum(dataset.get(), name, crc);
}

void CheckpointReader::Impl::copy_rows(const Tensor& staging, int64_t b0, int64_t o0, int64_t o1,
                                       int64_t first_row, const Tensor& destination,
                                       size_t row_bytes, bool direct) {
  if (direct) {
    std::memcpy(static_cast<char*>(destination.raw_data()) + (o0 - first_row) * row_bytes,
                static_cast<const char*>(staging.raw_data()) + (o0 - b0) * row_bytes,
                static_cast<size_t>(o1 - o0) * row_bytes);
  } else if (destination.rank() == 0) {
    Tensor target = destination;
    target.assign(staging);
  } else {
    Tensor target = destination.slice(0, o0 - first_row, o1 - first_row);
    target.assign(staging.slice(0, o0 - b0, o1 - b0));
  }
}

std::string CheckpointReader::Impl::verify_dataset(const std::string& name) const {
  try {
    Handle dataset = open_dataset(name);
    Handle type = checked(H5Dget_type(dataset.get()), ErrorCode::kDataLoss, context(name));
    Handle space = checked(H5Dget_space(dataset.get()), ErrorCode::kDataLoss, context(name));
    Shape shape = internal::dataspace_shape(space.get(), context(name));
    internal::RowReader rows(file.get(), dataset.get(), type.get(), shape, context(name));
    uint32_t crc = 0;
    if (rows.row_bytes() > 0) {
      // Two block buffers, one per reading thread, reused round after round.
      int64_t block_rows =
          std::max<int64_t>(1, static_cast<int64_t>(block_bytes / rows.row_bytes()));
      size_t buffer_bytes =
          static_cast<size_t>(std::min(block_rows, rows.rows())) * rows.row_bytes();
      std::vector<char> buffers(2 * buffer_bytes);
      for (int64_t b0 = 0; b0 < rows.rows(); b0 += 2 * block_rows) {
        std::vector<internal::RowReader::Block> pair;
        for (int i = 0; i < 2 && b0 + i * block_rows < rows.rows(); ++i) {
          int64_t begin = b0 + i * block_rows;
          pair.push_back({begin, std::min(rows.rows(), begin + block_rows),
                          buffers.data() + i * buffer_bytes});
        }
        std::vector<uint32_t> crcs = rows.read(pair, /*checksum=*/true);
        for (size_t i = 0; i < pair.size(); ++i) {
          crc = crc32c::combine(
              crc, crcs[i], static_cast<uint64_t>(pair[i].end - pair[i].begin) * rows.row_bytes());
        }
      }
    }
    check_checksum(dataset.get(), name, crc);
    return "";
  } catch (const Error& error) {
    std::string message = error.what();
    std::string prefix = context(name) + ": ";
    return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
  }
}

std::vector<std::string> CheckpointReader::Impl::datasets_in(const char* group) const {
  internal::quiet_hdf5();
  if (H5Lexists(file.get(), group, H5P_DEFAULT) <= 0) return {};
  Handle handle = checked(H5Gopen2(file.get(), group, H5P_DEFAULT), ErrorCode::kDataLoss,
                          str_cat("checkpoint ", path, ": cannot open group ", group));
  return internal::list_datasets(handle.get(), str_cat("checkpoint ", path, ", group ", group));
}

VariableInfo CheckpointReader::Impl::describe(const std::string& name) const {
  Handle dataset = open_dataset(name);
  Handle space = checked(H5Dget_space(dataset.get()), ErrorCode::kDataLoss, context(name));
  VariableInfo info;
  info.shape = internal::dataspace_shape(space.get(), context(name));
  info.dtype = internal::dtype_of_dataset(dataset.get(), context(name));
  info.slot_of =
      internal::read_string_attribute(dataset.get(), format::kSlotOfAttribute, context(name))
          .value_or("");
  return info;
}

void CheckpointReader::Impl::load_index() {
  std::string where = str_cat("checkpoint ", path);
  std::optional<std::string> format_name =
      internal::read_string_attribute(file.get(), format::kFormatAttribute, where);
  if (format_name != format::kFormatName) {
    throw DataLossError(str_cat(where, ": not a Cadre checkpoint (the root has no format = \"",
                                format::kFormatName, "\" attribute)"));
  }
  format_version =
      internal::read_int64_attribute(file.get(), format::kFormatVersionAttribute, where)
          .value_or(0);
  if (format_version < 1 || format_version > format::kShardedFormatVersion) {
    throw UnimplementedError(str_cat(where, ": format version ", format_version,
                                     "; this library reads versions 1 to ",
                                     format::kShardedFormatVersion));
  }
  Handle step = open_dataset(format::kGlobalStep);
  if (H5Dread(step.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &global_step) < 0) {
    internal::throw_hdf5(ErrorCode::kDataLoss,
                         str_cat(context(format::kGlobalStep), ": cannot read"));
  }
  check_checksum(step.get(), format::kGlobalStep, crc32c::value(&global_step, sizeof(global_step)));
  for (const char* group : {format::kVariables, format::kSlots}) {
    for (const std::string& name : datasets_in(group)) {
      std::string dataset = str_cat(group, "/", name);
      VariableInfo info = describe(dataset);
      if (std::string_view(group) == format::kSlots && info.slot_of.empty()) {
        throw DataLossError(str_cat(context(dataset), ": slot without a slot_of attribute"));
      }
      if (!variables.emplace(name, info).second) {
        throw DataLossError(str_cat(where, ": '", name, "' is both a variable and a slot"));
      }
      dataset_paths[name] = dataset;
    }
  }
  if (format_version >= format::kShardedFormatVersion) {
    sharded = std::make_unique<internal::ShardedLayout>(file.get(), path, &variables);
  }
}

void CheckpointReader::Impl::read_variable(const std::string& name, const VariableInfo& info,
                                           const std::vector<std::pair<int64_t, Tensor>>& pieces,
                                           bool verify) const {
  if (tf_bundle) {
    tf_bundle->read(name, pieces, verify);
  } else if (sharded && sharded->holds(name)) {
    sharded->read(name, info, pieces, verify);
  } else {
    read_pieces(dataset_paths.at(name), info, pieces, verify);
  }
}

}  // namespace cadre::checkpoint
