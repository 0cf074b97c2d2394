#include "cadre/checkpoint/writer.h"

#include <chrono>
#include <ctime>

#include "core/base/crc32c.h"
#include "checkpoint/format.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/row_writer.h"
#include "core/base/strings.h"

#ifndef CADRE_CHECKPOINT_LIBRARY_VERSION
#define CADRE_CHECKPOINT_LIBRARY_VERSION "unknown"
#endif

namespace cadre::checkpoint {
namespace {

using internal::checked;
using internal::Handle;

std::string iso8601_utc(double unix_seconds) {
  std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

class FileWriter {
 public:
  FileWriter(const std::string& path, const WriteOptions& options)
      : path_(path), options_(options) {
    internal::quiet_hdf5();
    Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), ErrorCode::kInternal, "H5Pcreate");
    // Large datasets start on page boundaries, so that reading them is a plain aligned copy.
    H5Pset_alignment(access.get(), hsize_t{1} << 20, 4096);
    // The HDF5 1.8 file format: its superblock and object headers carry checksums (so damaged
    // metadata fails to open instead of misreading), and every HDF5 from 1.8 on reads it.
    H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
    file_ = checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()),
                    ErrorCode::kUnavailable, str_cat("cannot create checkpoint ", path));
    link_ = checked(H5Pcreate(H5P_LINK_CREATE), ErrorCode::kInternal, "H5Pcreate");
    H5Pset_create_intermediate_group(link_.get(), 1);
    // Space allocated at creation and never filled: the data has its place in the file
    // before it is written (RowWriter writes it there), and nothing is written twice. One
    // list for every dataset: property lists are costly to make and to close.
    dataset_create_ = checked(H5Pcreate(H5P_DATASET_CREATE), ErrorCode::kInternal, "H5Pcreate");
    H5Pset_layout(dataset_create_.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(dataset_create_.get(), H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dataset_create_.get(), H5D_FILL_TIME_NEVER);
    descriptor_ = internal::posix_descriptor(file_.get());
  }

  hid_t file() const { return file_.get(); }
  internal::AttributeWriter& attributes() { return attributes_; }

  Handle group(const char* name) {
    return internal::create_groups(file_.get(), name, context(name));
  }

  // Writes the concatenation along axis 0 of `parts` (one part: a whole tensor) as dataset
  // `name` under `parent`, with its checksum and dtype attributes.
  Handle write_tensor(hid_t parent, const std::string& name, const std::string& full_name,
                      const std::vector<Tensor>& parts, const Shape& shape) {
    DType dtype = parts[0].dtype();
    Handle type = internal::hdf5_type_for(dtype);
    Handle dataset = create_dataset(parent, name, full_name, type.get(), shape);
    uint32_t crc = 0;
    if (shape.num_elements() > 0) {
      if (shape.rank() == 0) {
        Tensor host = host_contiguous(parts[0]);
        crc = crc32c::value(host.raw_data(), host.nbytes());
        write(dataset.get(), type.get(), H5S_ALL, H5S_ALL, host.raw_data(), full_name);
      } else {
        crc = write_rows(dataset.get(), type.get(), parts, shape, full_name);
      }
    }
    attributes_.write_uint32(dataset.get(), format::kChecksumAttribute, crc);
    attributes_.write_string(dataset.get(), format::kDtypeAttribute,
                             std::string(dtype_name(dtype)));
    return dataset;
  }

  // Writes raw little-endian bytes of HDF5 type `type` (a small dataset: RNG state, step).
  Handle write_small(hid_t parent, const std::string& name, const std::string& full_name,
                     hid_t type, const Shape& shape, const void* bytes, size_t size) {
    Handle dataset = create_dataset(parent, name, full_name, type, shape);
    write(dataset.get(), type, H5S_ALL, H5S_ALL, bytes, full_name);
    attributes_.write_uint32(dataset.get(), format::kChecksumAttribute, crc32c::value(bytes, size));
    return dataset;
  }

  void close() {
    if (!file_.close()) {
      internal::throw_hdf5(ErrorCode::kUnavailable, str_cat("cannot finish checkpoint ", path_));
    }
  }

 private:
  std::string context(const std::string& object) const {
    return str_cat("checkpoint ", path_, ", ", object);
  }

  static Tensor host_contiguous(const Tensor& tensor) {
    Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
    return host.contiguous();
  }

  Handle create_dataset(hid_t parent, const std::string& name, const std::string& full_name,
                        hid_t type, const Shape& shape) {
    Handle space = internal::make_dataspace(shape);
    return checked(H5Dcreate2(parent, name.c_str(), type, space.get(), link_.get(),
                              dataset_create_.get(), H5P_DEFAULT),
                   ErrorCode::kUnavailable, context(str_cat("cannot create dataset ", full_name)));
  }

  void write(hid_t dataset, hid_t type, hid_t memory_space, hid_t file_space, const void* data,
             const std::string& full_name) {
    if (H5Dwrite(dataset, type, memory_space, file_space, H5P_DEFAULT, data) < 0) {
      internal::throw_hdf5(ErrorCode::kUnavailable,
                           context(str_cat("cannot write dataset ", full_name)));
    }
  }

  // Rows in blocks: those of contiguous host parts straight from their memory, two threads
  // at a time; the others copied to the host one block at a time.
  uint32_t write_rows(hid_t dataset, hid_t type, const std::vector<Tensor>& parts,
                      const Shape& shape, const std::string& full_name) {
    internal::RowWriter writer(dataset, type, shape, context(full_name), options_.durable,
                               descriptor_);
    const size_t row_bytes = writer.row_bytes();
    const int64_t rows_per_block =
        std::max<int64_t>(1, static_cast<int64_t>(options_.block_bytes / row_bytes));
    uint32_t crc = 0;
    std::vector<internal::RowWriter::Block> run;
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
    return crc;
  }

  std::string path_;
  WriteOptions options_;
  Handle file_;
  Handle link_;
  Handle dataset_create_;
  int descriptor_ = -1;  // the file's, for RowWriter
  internal::AttributeWriter attributes_;
};

}  // namespace

const char* library_version() { return CADRE_CHECKPOINT_LIBRARY_VERSION; }

void write_checkpoint_file(const std::string& path, const CheckpointData& data,
                           const WriteOptions& options) {
  check_data(data);
  double created = options.created_unix_seconds;
  if (created == 0) {
    created =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  FileWriter writer(path, options);
  hid_t root = writer.file();
  writer.attributes().write_string(root, format::kFormatAttribute, format::kFormatName);
  writer.attributes().write_int64(root, format::kFormatVersionAttribute, format::kFormatVersion);
  writer.attributes().write_string(root, format::kLibraryVersionAttribute, library_version());
  writer.attributes().write_double(root, format::kCreatedUnixAttribute, created);
  writer.attributes().write_string(root, format::kCreatedAttribute, iso8601_utc(created));
  writer.attributes().write_int64(root, format::kGlobalStepAttribute, data.global_step);

  Handle step_type = checked(H5Tcopy(H5T_STD_I64LE), ErrorCode::kInternal, "H5Tcopy");
  Handle step = writer.write_small(root, format::kGlobalStep, format::kGlobalStep, step_type.get(),
                                   Shape{}, &data.global_step, sizeof(data.global_step));
  writer.attributes().write_string(step.get(), format::kDtypeAttribute, "int64");

  Handle variables = writer.group(format::kVariables);
  Handle slots = writer.group(format::kSlots);
  auto write_variable = [&](const std::string& name, const std::vector<Tensor>& parts,
                            const Shape& shape) {
    auto slot = data.slot_of.find(name);
    bool is_slot = slot != data.slot_of.end();
    std::string full_name = str_cat(is_slot ? format::kSlots : format::kVariables, "/", name);
    Handle dataset =
        writer.write_tensor(is_slot ? slots.get() : variables.get(), name, full_name, parts, shape);
    if (is_slot) {
      writer.attributes().write_string(dataset.get(), format::kSlotOfAttribute, slot->second);
    }
  };
  for (const auto& [name, value] : data.variables) {
    write_variable(name, {value}, value.shape());
  }
  for (const auto& [name, parts] : data.partitioned_variables) {
    write_variable(name, parts, partitioned_shape(parts));
  }

  Handle rng = writer.group(format::kRng);
  Handle rng_type = checked(H5Tcopy(H5T_STD_U64LE), ErrorCode::kInternal, "H5Tcopy");
  for (const auto& [name, state] : data.rng_states) {
    uint64_t fields[3] = {state.seed, state.stream, state.offset};
    Handle dataset = writer.write_small(rng.get(), name, str_cat(format::kRng, "/", name),
                                        rng_type.get(), Shape{3}, fields, sizeof(fields));
    writer.attributes().write_string(dataset.get(), format::kRngFieldsAttribute,
                                     format::kRngFields);
  }

  Handle iterator = writer.group(format::kIterator);
  for (const auto& [name, value] : data.iterator_state) {
    writer.write_tensor(iterator.get(), name, str_cat(format::kIterator, "/", name), {value},
                        value.shape());
  }

  Handle metadata = writer.group(format::kMetadata);
  for (const auto& [key, value] : data.attributes) {
    writer.attributes().write_string(metadata.get(), key, value);
  }
  variables.reset();
  slots.reset();
  rng.reset();
  iterator.reset();
  metadata.reset();
  step.reset();
  writer.close();
}

}  // namespace cadre::checkpoint
