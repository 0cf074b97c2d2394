#include "cadre/checkpoint/reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "checkpoint/format.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/reader_impl.h"
#include "checkpoint/superblock.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {

using internal::checked;
using internal::Handle;

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

std::unique_ptr<CheckpointReader> CheckpointReader::open(const std::string& path) {
  std::shared_ptr<Env> env = posix_env();
  if (std::optional<std::string> prefix = internal::tf_bundle_prefix(*env, path)) {
    auto impl = std::make_unique<Impl>();
    impl->path = *prefix;
    impl->tf_bundle = std::make_unique<internal::TfBundleReader>(env, *prefix);
    impl->variables = impl->tf_bundle->variables();
    impl->global_step = impl->tf_bundle->global_step();
    return std::unique_ptr<CheckpointReader>(new CheckpointReader(std::move(impl)));
  }
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
  if (impl_->tf_bundle) {
    result["format"] = "tensorflow-bundle";
    result["num_shards"] = std::to_string(impl_->tf_bundle->num_shards());
    result["tensors_not_read"] = std::to_string(impl_->tf_bundle->skipped());
    return result;
  }
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
  impl_->read_variable(name, info, {{0, result}}, verify);
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
  impl_->read_variable(name, info, {{0, destination}}, verify);
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
  impl_->read_variable(name, info, partitions, verify);
}

std::map<std::string, Generator::State> CheckpointReader::rng_states(bool verify) const {
  std::map<std::string, Generator::State> states;
  if (impl_->tf_bundle) return states;
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
    if (verify)
      impl_->check_checksum(dataset.get(), dataset_name, crc32c::value(fields, sizeof(fields)));
    states[name] = Generator::State{fields[0], fields[1], fields[2]};
  }
  return states;
}

std::map<std::string, Tensor> CheckpointReader::iterator_state(bool verify) const {
  std::map<std::string, Tensor> state;
  if (impl_->tf_bundle) return state;
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
  if (impl_->tf_bundle) {
    sizes.file = impl_->tf_bundle->bytes();
    for (const auto& [name, info] : impl_->variables) {
      uint64_t bytes = static_cast<uint64_t>(info.shape.num_elements()) * dtype_size(info.dtype);
      (info.slot_of.empty() ? sizes.variables : sizes.slots) += bytes;
    }
    return sizes;
  }
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
  if (impl_->sharded) impl_->sharded->add_sizes(&sizes);
  return sizes;
}

std::vector<DatasetProblem> CheckpointReader::verify() const {
  if (impl_->tf_bundle) return impl_->tf_bundle->verify();
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
  if (impl_->sharded) {
    for (DatasetProblem& problem : impl_->sharded->verify()) problems.push_back(std::move(problem));
  }
  return problems;
}

}  // namespace cadre::checkpoint
