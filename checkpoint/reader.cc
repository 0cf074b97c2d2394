#include "cadre/checkpoint/reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cadre/base/errors.h"
#include "core/base/crc32c.h"
#include "checkpoint/format.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/row_reader.h"
#include "checkpoint/superblock.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {

using internal::checked;
using internal::Handle;

namespace {

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

int64_t rows_of(const Shape& shape) { return shape.rank() == 0 ? 1 : shape[0]; }

}  // namespace

struct CheckpointReader::Impl {
  std::string path;
  Handle file;
  int64_t global_step = 0;
  int64_t format_version = 0;
  std::map<std::string, VariableInfo> variables;
  std::map<std::string, std::string> dataset_paths;  // logical name -> path in the file
  size_t block_bytes = size_t{2} << 20;

  std::string context(const std::string& dataset) const {
    return str_cat("checkpoint ", path, ", dataset ", dataset);
  }

  Handle open_dataset(const std::string& dataset) const {
    internal::quiet_hdf5();
    return checked(H5Dopen2(file.get(), dataset.c_str(), H5P_DEFAULT), ErrorCode::kDataLoss,
                   str_cat(context(dataset), ": cannot open"));
  }

  uint32_t stored_checksum(hid_t dataset, const std::string& name) const {
    std::optional<uint32_t> crc =
        internal::read_uint32_attribute(dataset, format::kChecksumAttribute, context(name));
    if (!crc) throw DataLossError(str_cat(context(name), ": has no crc32c attribute"));
    return *crc;
  }

  void check_checksum(hid_t dataset, const std::string& name, uint32_t computed) const {
    uint32_t stored = stored_checksum(dataset, name);
    if (stored != computed) {
      throw DataLossError(str_cat(context(name), ": checksum mismatch (stored ", hex(stored),
                                  ", computed ", hex(computed), "): the file is damaged"));
    }
  }

  // Writes rows [first_row, first_row + rows) of dataset `name` into each piece's tensor
  // (pieces do not overlap). With `verify`, every row of the dataset is read once and
  // checksummed; otherwise only the rows the pieces need.
  void read_pieces(const std::string& name, const VariableInfo& info,
                   const std::vector<std::pair<int64_t, Tensor>>& pieces, bool verify) const {
    const Shape& shape = info.shape;
    Handle dataset = open_dataset(name);
    Handle memory_type = internal::hdf5_type_for(info.dtype);
    internal::RowReader rows(file.get(), dataset.get(), memory_type.get(), shape, context(name));
    const size_t row_bytes = rows.row_bytes();
    uint32_t crc = 0;
    if (row_bytes > 0) {
      const int64_t block_rows =
          std::max<int64_t>(1, static_cast<int64_t>(block_bytes / row_bytes));
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

  // Copies rows [o0, o1) (logical) from `staging` (which holds rows from b0) to
  // `destination` (which holds rows from first_row).
  static void copy_rows(const Tensor& staging, int64_t b0, int64_t o0, int64_t o1,
                        int64_t first_row, const Tensor& destination, size_t row_bytes,
                        bool direct) {
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

  // Checksums a whole dataset of any element type; returns a problem, empty when intact.
  std::string verify_dataset(const std::string& name) const {
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
                crc, crcs[i],
                static_cast<uint64_t>(pair[i].end - pair[i].begin) * rows.row_bytes());
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

  // Datasets of a group, or none when the group is absent (older or foreign files).
  std::vector<std::string> datasets_in(const char* group) const {
    internal::quiet_hdf5();
    if (H5Lexists(file.get(), group, H5P_DEFAULT) <= 0) return {};
    Handle handle = checked(H5Gopen2(file.get(), group, H5P_DEFAULT), ErrorCode::kDataLoss,
                            str_cat("checkpoint ", path, ": cannot open group ", group));
    return internal::list_datasets(handle.get(), str_cat("checkpoint ", path, ", group ", group));
  }

  VariableInfo describe(const std::string& name) const {
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

  void load_index() {
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
    if (format_version < 1 || format_version > format::kFormatVersion) {
      throw UnimplementedError(str_cat(where, ": format version ", format_version,
                                       "; this library reads versions 1 to ",
                                       format::kFormatVersion));
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
  }
};

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

std::unique_ptr<CheckpointReader> CheckpointReader::open(const std::string& path) {
  internal::quiet_hdf5();
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    throw NotFoundError(str_cat("checkpoint ", path, " does not exist"));
  }
  if (!S_ISREG(info.st_mode)) throw DataLossError(str_cat("checkpoint ", path, " is not a file"));
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) {
    throw DataLossError(str_cat("checkpoint ", path, " is not an HDF5 file (no HDF5 signature; ",
                                info.st_size, " bytes): not a checkpoint, or damaged"));
  }
  if (is_hdf5 < 0) {
    internal::throw_hdf5(ErrorCode::kDataLoss, str_cat("checkpoint ", path, " cannot be read"));
  }
  {
    std::ifstream in(path, std::ios::binary);
    std::string head(96, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    internal::check_superblock(path, head, static_cast<uint64_t>(info.st_size));
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    internal::throw_hdf5(
        ErrorCode::kDataLoss,
        str_cat("checkpoint ", path, " is truncated or damaged (HDF5 cannot open it)"));
  }
  impl->file = Handle(file);
  try {
    impl->load_index();
  } catch (const NotFoundError& error) {
    throw DataLossError(error.what());
  }
  return std::unique_ptr<CheckpointReader>(new CheckpointReader(std::move(impl)));
}

const std::string& CheckpointReader::path() const { return impl_->path; }
int64_t CheckpointReader::global_step() const { return impl_->global_step; }
int64_t CheckpointReader::format_version() const { return impl_->format_version; }
void CheckpointReader::set_block_bytes(size_t bytes) {
  impl_->block_bytes = std::max<size_t>(bytes, 1);
}

std::map<std::string, std::string> CheckpointReader::attributes() const {
  std::string where = str_cat("checkpoint ", impl_->path);
  std::map<std::string, std::string> result;
  for (const std::string& name : internal::attribute_names(impl_->file.get(), where)) {
    result[name] = internal::attribute_as_text(impl_->file.get(), name, where);
  }
  if (H5Lexists(impl_->file.get(), format::kMetadata, H5P_DEFAULT) > 0) {
    Handle metadata = checked(H5Gopen2(impl_->file.get(), format::kMetadata, H5P_DEFAULT),
                              ErrorCode::kDataLoss, where);
    for (const std::string& name : internal::attribute_names(metadata.get(), where)) {
      result[name] = internal::attribute_as_text(metadata.get(), name, where);
    }
  }
  return result;
}

const std::map<std::string, VariableInfo>& CheckpointReader::variables() const {
  return impl_->variables;
}

const VariableInfo& CheckpointReader::variable(const std::string& name) const {
  auto it = impl_->variables.find(name);
  if (it != impl_->variables.end()) return it->second;
  std::vector<std::string> nearby;
  auto near = impl_->variables.lower_bound(name);
  if (near != impl_->variables.begin()) --near;
  for (int i = 0; i < 3 && near != impl_->variables.end(); ++i, ++near)
    nearby.push_back(near->first);
  throw NotFoundError(str_cat("checkpoint ", impl_->path, " has no variable '", name, "' (",
                              impl_->variables.size(), " variables; nearby: ", join(nearby), ")"));
}

Tensor CheckpointReader::read(const std::string& name, bool verify) const {
  const VariableInfo& info = variable(name);
  Tensor result = Tensor::empty(info.shape, info.dtype, Device::cpu());
  impl_->read_pieces(impl_->dataset_paths.at(name), info, {{0, result}}, verify);
  return result;
}

void CheckpointReader::read_into(const std::string& name, const Tensor& destination,
                                 bool verify) const {
  const VariableInfo& info = variable(name);
  if (destination.shape() != info.shape) {
    throw InvalidArgumentError(str_cat("checkpoint ", impl_->path, ": variable '", name,
                                       "' has shape ", info.shape, ", the destination ",
                                       destination.shape()));
  }
  impl_->read_pieces(impl_->dataset_paths.at(name), info, {{0, destination}}, verify);
}

void CheckpointReader::read_rows_into(const std::string& name, int64_t first_row,
                                      const Tensor& destination, bool verify) const {
  read_partitions_into(name, {{first_row, destination}}, verify);
}

void CheckpointReader::read_partitions_into(
    const std::string& name, const std::vector<std::pair<int64_t, Tensor>>& partitions,
    bool verify) const {
  const VariableInfo& info = variable(name);
  const Shape& shape = info.shape;
  for (const auto& [first_row, destination] : partitions) {
    if (shape.rank() == 0 || destination.rank() != shape.rank() ||
        destination.shape().without_dim(0) != shape.without_dim(0) || first_row < 0 ||
        first_row + destination.dim(0) > shape[0]) {
      throw InvalidArgumentError(str_cat("checkpoint ", impl_->path, ": cannot read rows from ",
                                         first_row, " of variable '", name, "' of shape ", shape,
                                         " into a tensor of shape ", destination.shape()));
    }
  }
  impl_->read_pieces(impl_->dataset_paths.at(name), info, partitions, verify);
}

std::map<std::string, Generator::State> CheckpointReader::rng_states(bool verify) const {
  std::map<std::string, Generator::State> states;
  for (const std::string& name : impl_->datasets_in(format::kRng)) {
    std::string dataset_name = str_cat(format::kRng, "/", name);
    Handle dataset = impl_->open_dataset(dataset_name);
    Handle space =
        checked(H5Dget_space(dataset.get()), ErrorCode::kDataLoss, impl_->context(dataset_name));
    if (internal::dataspace_shape(space.get(), impl_->context(dataset_name)) != Shape{3}) {
      throw DataLossError(str_cat(impl_->context(dataset_name), ": RNG state is not 3 values"));
    }
    uint64_t fields[3];
    if (H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, fields) < 0) {
      internal::throw_hdf5(ErrorCode::kDataLoss,
                           str_cat(impl_->context(dataset_name), ": cannot read"));
    }
    if (verify) impl_->check_checksum(dataset.get(), dataset_name, crc32c::value(fields, sizeof(fields)));
    states[name] = Generator::State{fields[0], fields[1], fields[2]};
  }
  return states;
}

std::map<std::string, Tensor> CheckpointReader::iterator_state(bool verify) const {
  std::map<std::string, Tensor> state;
  for (const std::string& name : impl_->datasets_in(format::kIterator)) {
    std::string dataset_name = str_cat(format::kIterator, "/", name);
    VariableInfo info = impl_->describe(dataset_name);
    Tensor value = Tensor::empty(info.shape, info.dtype, Device::cpu());
    impl_->read_pieces(dataset_name, info, {{0, value}}, verify);
    state[name] = value;
  }
  return state;
}

CheckpointSizes CheckpointReader::sizes() const {
  CheckpointSizes sizes;
  std::error_code ec;
  sizes.file = std::filesystem::file_size(impl_->path, ec);
  for (const std::string& name :
       internal::list_datasets(impl_->file.get(), str_cat("checkpoint ", impl_->path))) {
    Handle dataset = impl_->open_dataset(name);
    uint64_t bytes = H5Dget_storage_size(dataset.get());
    std::string_view group = std::string_view(name).substr(0, name.find('/'));
    if (group == format::kVariables) {
      sizes.variables += bytes;
    } else if (group == format::kSlots) {
      sizes.slots += bytes;
    } else if (group == format::kIterator) {
      sizes.input += bytes;
    } else {
      sizes.rng += bytes;
    }
  }
  return sizes;
}

std::vector<DatasetProblem> CheckpointReader::verify() const {
  std::vector<DatasetProblem> problems;
  std::vector<std::string> datasets;
  try {
    datasets = internal::list_datasets(impl_->file.get(), str_cat("checkpoint ", impl_->path));
  } catch (const Error& error) {
    return {{"/", error.what()}};
  }
  for (const std::string& name : datasets) {
    std::string problem = impl_->verify_dataset(name);
    if (!problem.empty()) problems.push_back({name, problem});
  }
  return problems;
}

}  // namespace cadre::checkpoint
