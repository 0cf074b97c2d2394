#include "checkpoint/file_builder.h"

#include <ctime>

#include "checkpoint/format.h"
#include "checkpoint/row_writer.h"
#include "core/base/crc32c.h"
#include "core/base/strings.h"
#include "core/runtime/in_parallel.h"

namespace cadre::checkpoint::internal {
namespace {

std::string iso8601_utc(double unix_seconds) {
  std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Tensor host_contiguous(const Tensor& tensor) {
  Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
  return host.contiguous();
}

}  // namespace

std::string layout_key(const CheckpointData& data, double created) {
  std::string key = str_cat(iso8601_utc(created).size(), "|");
  auto add = [&](char kind, const std::string& name, std::string_view detail) {
    key += kind;
    key += name;
    key += '\0';
    key += detail;
    key += '\0';
  };
  for (const auto& [name, value] : data.variables) add('v', name, dtype_name(value.dtype()));
  for (const auto& [name, parts] : data.partitioned_variables) {
    add('p', name, dtype_name(parts[0].dtype()));
  }
  for (const auto& [slot, variable] : data.slot_of) add('s', slot, variable);
  for (const auto& [name, state] : data.rng_states) add('r', name, "");
  for (const auto& [name, value] : data.iterator_state) add('i', name, dtype_name(value.dtype()));
  for (const auto& [name, value] : data.attributes) add('a', name, value);
  return key;
}

FileBuilder::FileBuilder(hid_t file) : file_(file) {
  quiet_hdf5();
  link_ = checked(H5Pcreate(H5P_LINK_CREATE), ErrorCode::kInternal, "H5Pcreate");
  H5Pset_create_intermediate_group(link_.get(), 1);
  // Space allocated at creation and never filled: the data has its place in the file
  // before it is written (RowWriter writes it there), and nothing is written twice. One
  // list for every dataset: property lists are costly to make and to close.
  dataset_create_ = checked(H5Pcreate(H5P_DATASET_CREATE), ErrorCode::kInternal, "H5Pcreate");
  H5Pset_layout(dataset_create_.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(dataset_create_.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dataset_create_.get(), H5D_FILL_TIME_NEVER);
  step_type_ = checked(H5Tcopy(H5T_STD_I64LE), ErrorCode::kInternal, "H5Tcopy");
  rng_type_ = checked(H5Tcopy(H5T_STD_U64LE), ErrorCode::kInternal, "H5Tcopy");
}

void FileBuilder::write(const CheckpointData& data, double created,
                        const Destination& destination) {
  quiet_hdf5();
  const bool first = !built_;
  built_ = true;
  destination_ = destination;
  direct_.clear();
  if (first) {
    attributes_.write_string(file_, format::kFormatAttribute, format::kFormatName);
    attributes_.write_int64(file_, format::kFormatVersionAttribute, format::kFormatVersion);
    attributes_.write_string(file_, format::kLibraryVersionAttribute, library_version());
  }
  std::string created_text = iso8601_utc(created);
  set_attribute(root_attributes_[format::kCreatedUnixAttribute], file_,
                format::kCreatedUnixAttribute, H5T_IEEE_F64LE, &created);
  set_attribute(root_attributes_[format::kCreatedAttribute], file_, format::kCreatedAttribute,
                attributes_.string_type(created_text.size()), created_text.data());
  set_attribute(root_attributes_[format::kGlobalStepAttribute], file_, format::kGlobalStepAttribute,
                H5T_STD_I64LE, &data.global_step);

  if (write_small(file_, format::kGlobalStep, format::kGlobalStep, step_type_.get(), Shape{},
                  &data.global_step, sizeof(data.global_step))) {
    attributes_.write_string(datasets_[format::kGlobalStep].dataset.get(), format::kDtypeAttribute,
                             "int64");
  }

  hid_t variables = group(variables_, format::kVariables).get();
  hid_t slots = group(slots_, format::kSlots).get();
  auto write_variable = [&](const std::string& name, const std::vector<Tensor>& parts,
                            const Shape& shape) {
    auto slot = data.slot_of.find(name);
    bool is_slot = slot != data.slot_of.end();
    std::string full_name = str_cat(is_slot ? format::kSlots : format::kVariables, "/", name);
    const RowSource* source = nullptr;
    if (destination.sources != nullptr) {
      if (auto it = destination.sources->find(name); it != destination.sources->end()) {
        source = &it->second;
      }
    }
    const RowsInPlace* in_place = nullptr;
    if (destination.in_place != nullptr) {
      if (auto it = destination.in_place->find(name); it != destination.in_place->end()) {
        in_place = &it->second;
      }
    }
    write_tensor(is_slot ? slots : variables, name, full_name, parts, shape,
                 is_slot ? slot->second.c_str() : nullptr, source, in_place);
  };
  for (const auto& [name, value] : data.variables) write_variable(name, {value}, value.shape());
  for (const auto& [name, parts] : data.partitioned_variables) {
    write_variable(name, parts, partitioned_shape(parts));
  }

  hid_t rng = group(rng_, format::kRng).get();
  for (const auto& [name, state] : data.rng_states) {
    uint64_t fields[3] = {state.seed, state.stream, state.offset};
    std::string full_name = str_cat(format::kRng, "/", name);
    if (write_small(rng, name, full_name, rng_type_.get(), Shape{3}, fields, sizeof(fields))) {
      attributes_.write_string(datasets_[full_name].dataset.get(), format::kRngFieldsAttribute,
                               format::kRngFields);
    }
  }

  hid_t iterator = group(iterator_, format::kIterator).get();
  for (const auto& [name, value] : data.iterator_state) {
    write_tensor(iterator, name, str_cat(format::kIterator, "/", name), {value}, value.shape(),
                 nullptr);
  }

  if (first) {
    hid_t metadata = group(metadata_, format::kMetadata).get();
    for (const auto& [key, value] : data.attributes) {
      attributes_.write_string(metadata, key, value);
    }
  }
}

Handle& FileBuilder::group(Handle& slot, const char* name) {
  if (!slot.valid()) slot = create_groups(file_, name, context(name));
  return slot;
}

FileBuilder::Dataset& FileBuilder::dataset(hid_t parent, const std::string& name,
                                           const std::string& full_name, hid_t type,
                                           const Shape& shape, bool* created) {
  Dataset& entry = datasets_[full_name];
  *created = !entry.dataset.valid() || entry.shape != shape;
  if (!*created) return entry;
  if (entry.dataset.valid()) {
    // A new shape (an input pipeline's state varies in size): the old dataset goes, and
    // HDF5 reuses its space.
    entry.checksum.reset();
    entry.dataset.reset();
    if (H5Ldelete(parent, name.c_str(), H5P_DEFAULT) < 0) {
      throw_hdf5(ErrorCode::kUnavailable, context(str_cat("cannot replace dataset ", full_name)));
    }
  }
  Handle space = make_dataspace(shape);
  entry.dataset =
      checked(H5Dcreate2(parent, name.c_str(), type, space.get(), link_.get(),
                         dataset_create_.get(), H5P_DEFAULT),
              ErrorCode::kUnavailable, context(str_cat("cannot create dataset ", full_name)));
  entry.shape = shape;
  return entry;
}

void FileBuilder::write_tensor(hid_t parent, const std::string& name, const std::string& full_name,
                               const std::vector<Tensor>& parts, const Shape& shape,
                               const char* slot_of, const RowSource* source,
                               const RowsInPlace* in_place) {
  DType dtype = parts[0].dtype();
  // The dtype is part of the layout: the type made for the first write serves every later one.
  Handle& type = datasets_[full_name].type;
  if (!type.valid()) type = hdf5_type_for(dtype);
  bool created = false;
  Dataset& entry = dataset(parent, name, full_name, type.get(), shape, &created);
  if (created) {
    attributes_.write_string(entry.dataset.get(), format::kDtypeAttribute,
                             std::string(dtype_name(dtype)));
    if (slot_of != nullptr) {
      attributes_.write_string(entry.dataset.get(), format::kSlotOfAttribute, slot_of);
    }
  }
  uint32_t crc = 0;
  if (shape.num_elements() > 0) {
    if (source != nullptr || in_place != nullptr) {
      if (shape.rank() == 0) {
        throw InvalidArgumentError(context(str_cat("a row source for 0-d dataset ", full_name)));
      }
      crc = write_streamed(entry, type.get(), source, in_place, full_name);
    } else if (shape.rank() == 0) {
      Tensor host = host_contiguous(parts[0]);
      crc = crc32c::value(host.raw_data(), host.nbytes());
      if (H5Dwrite(entry.dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                   host.raw_data()) < 0) {
        throw_hdf5(ErrorCode::kUnavailable, context(str_cat("cannot write dataset ", full_name)));
      }
    } else {
      crc = write_rows(entry, type.get(), parts, full_name);
    }
  }
  set_attribute(entry.checksum, entry.dataset.get(), format::kChecksumAttribute, H5T_STD_U32LE,
                &crc);
}

bool FileBuilder::write_small(hid_t parent, const std::string& name, const std::string& full_name,
                              hid_t type, const Shape& shape, const void* bytes, size_t size) {
  bool created = false;
  Dataset& entry = dataset(parent, name, full_name, type, shape, &created);
  if (H5Dwrite(entry.dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0) {
    throw_hdf5(ErrorCode::kUnavailable, context(str_cat("cannot write dataset ", full_name)));
  }
  uint32_t crc = crc32c::value(bytes, size);
  set_attribute(entry.checksum, entry.dataset.get(), format::kChecksumAttribute, H5T_STD_U32LE,
                &crc);
  return created;
}

// Rows in blocks: those of contiguous host parts straight from their memory, two threads
// at a time; the others copied to the host one block at a time.
uint32_t FileBuilder::write_rows(Dataset& dataset, hid_t type, const std::vector<Tensor>& parts,
                                 const std::string& full_name) {
  RowWriter writer(dataset.dataset.get(), type, dataset.shape, context(full_name),
                   destination_.options.durable, destination_.descriptor);
  const size_t row_bytes = writer.row_bytes();
  const int64_t rows_per_block =
      std::max<int64_t>(1, static_cast<int64_t>(destination_.options.block_bytes / row_bytes));
  uint32_t crc = 0;
  std::vector<RowWriter::Block> run;
  auto flush = [&] {
    std::vector<uint32_t> crcs = writer.write(run);
    for (size_t i = 0; i < crcs.size(); ++i) {
      crc = crc32c::combine(crc, crcs[i],
                            static_cast<uint64_t>(run[i].end - run[i].begin) * row_bytes);
    }
    run.clear();
  };
  int64_t row = 0;
  for (const Tensor& part : parts) {
    const bool direct = part.device().is_cpu() && part.is_contiguous();
    for (int64_t begin = 0; begin < part.dim(0); begin += rows_per_block) {
      int64_t end = std::min(part.dim(0), begin + rows_per_block);
      if (direct) {
        run.push_back({row + begin, row + end,
                       static_cast<const char*>(part.raw_data()) + begin * row_bytes});
        continue;
      }
      flush();
      Tensor staged = host_contiguous(part.slice(0, begin, end));
      run.push_back({row + begin, row + end, staged.raw_data()});
      flush();
    }
    row += part.dim(0);
  }
  flush();
  if (writer.direct()) {
    auto begin = static_cast<uint64_t>(writer.offset());
    direct_.push_back({begin, begin + static_cast<uint64_t>(row) * row_bytes, crc});
  }
  return crc;
}

uint32_t FileBuilder::write_streamed(Dataset& dataset, hid_t type, const RowSource* source,
                                     const RowsInPlace* in_place, const std::string& full_name) {
  RowWriter writer(dataset.dataset.get(), type, dataset.shape, context(full_name),
                   destination_.options.durable, destination_.descriptor);
  const size_t row_bytes = writer.row_bytes();
  const int64_t rows = dataset.shape[0];
  const int64_t rows_per_block =
      std::max<int64_t>(1, static_cast<int64_t>(destination_.options.block_bytes / row_bytes));
  const size_t blocks = static_cast<size_t>((rows + rows_per_block - 1) / rows_per_block);
  // A copying source gets one bounded buffer: it copies a block (under its owner's lock,
  // briefly), the writer writes it; the memory a save holds stays a block whatever the
  // tensor's size.
  std::vector<char> block(
      in_place != nullptr ? 0 : static_cast<size_t>(std::min(rows, rows_per_block)) * row_bytes);
  std::vector<uint32_t> crcs(blocks);
  auto write_block = [&](size_t i) {
    const int64_t begin = static_cast<int64_t>(i) * rows_per_block;
    const int64_t end = std::min(rows, begin + rows_per_block);
    auto write = [&](const void* data) { crcs[i] = writer.write({{begin, end, data}})[0]; };
    if (in_place != nullptr) {
      (*in_place)(begin, end, write);
    } else {
      (*source)(begin, end, block.data());
      write(block.data());
    }
  };
  // Blocks where they lie go two at a time, as write_rows's: each thread checksums its
  // block while the other's is written back. A copying source is asked in order.
  const int threads = in_place != nullptr && blocks > 1 ? 2 : 1;
  in_parallel(threads, [&](int first) {
    for (size_t i = static_cast<size_t>(first); i < blocks; i += static_cast<size_t>(threads)) {
      write_block(i);
    }
  });
  uint32_t crc = 0;
  for (size_t i = 0; i < blocks; ++i) {
    const int64_t begin = static_cast<int64_t>(i) * rows_per_block;
    const int64_t end = std::min(rows, begin + rows_per_block);
    crc = crc32c::combine(crc, crcs[i], static_cast<uint64_t>(end - begin) * row_bytes);
  }
  if (writer.direct()) {
    auto begin = static_cast<uint64_t>(writer.offset());
    direct_.push_back({begin, begin + static_cast<uint64_t>(rows) * row_bytes, crc});
  }
  return crc;
}

void FileBuilder::set_attribute(Handle& slot, hid_t object, const char* name, hid_t type,
                                const void* value) {
  if (!slot.valid()) {
    slot = attributes_.create(object, name, type, value);
    return;
  }
  if (H5Awrite(slot.get(), type, value) < 0) {
    throw_hdf5(ErrorCode::kUnavailable, context(str_cat("cannot write attribute ", name)));
  }
}

std::string FileBuilder::context(const std::string& object) const {
  return str_cat("checkpoint ", destination_.path, ", ", object);
}

}  // namespace cadre::checkpoint::internal
