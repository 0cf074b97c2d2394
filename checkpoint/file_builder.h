// Internal to the checkpoint module: lays out one checkpoint (FORMAT.md) in an open HDF5
// file, its groups, datasets and attributes, and can later put another checkpoint's values
// into the same objects. Creating HDF5 objects is most of what a small checkpoint costs
// (about 60 objects and 100 attributes for an MLP: over a millisecond of CPU); overwriting
// values in objects that exist costs a fraction of that, which is what lets
// CheckpointFileWriter keep one in-memory file from save to save.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/writer.h"
#include "checkpoint/hdf5_util.h"
#include "checkpoint/parts.h"

namespace cadre::checkpoint::internal {

// What must not change for a FileBuilder to write a checkpoint over the last one: every
// name with its dtype and role, the attributes, and the length of the creation time's text
// (its attribute's type). Shapes may change.
std::string layout_key(const CheckpointData& data, double created);

// Bytes [begin, end) of a file that FileBuilder::write sent to the descriptor with pwrite:
// one dataset's data, and the CRC-32C of those bytes (its checksum attribute).
struct DirectRange {
  uint64_t begin = 0, end = 0;
  uint32_t crc32c = 0;
};

class FileBuilder {
 public:
  // `file` stays owned by the caller, who destroys the builder before closing it (open
  // objects keep an HDF5 file open).
  explicit FileBuilder(hid_t file);

  // Where write() sends the datasets' bytes.
  struct Destination {
    std::string path;  // the file on disk, named in errors
    WriteOptions options;
    // pwrite goes to this descriptor at each dataset's place in the file: the file's own,
    // or that of the file an in-memory one is copied to. -1 writes through HDF5.
    int descriptor = -1;
    // Rows of the variables and slots named here come from these, not from their tensors.
    const RowSources* sources = nullptr;
    const RowsInPlaceSources* in_place = nullptr;
  };

  // Writes `data` (checked by check_data) with `created` as its time. The first call
  // creates every object; later calls require data of the same layout_key and overwrite
  // values, replacing only datasets whose shape changed. After a write that threw, the
  // builder and its file are of no further use.
  void write(const CheckpointData& data, double created, const Destination& destination);

  // The datasets' data that the last write() sent to the descriptor, in the order written.
  const std::vector<DirectRange>& direct_ranges() const { return direct_; }

 private:
  struct Dataset {
    Handle dataset;
    Handle checksum;  // the "checksum" attribute
    Handle type;      // the HDF5 type of the elements
    Shape shape;
  };

  Handle& group(Handle& slot, const char* name);
  Dataset& dataset(hid_t parent, const std::string& name, const std::string& full_name, hid_t type,
                   const Shape& shape, bool* created);
  void write_tensor(hid_t parent, const std::string& name, const std::string& full_name,
                    const std::vector<Tensor>& parts, const Shape& shape, const char* slot_of,
                    const RowSource* source = nullptr, const RowsInPlace* in_place = nullptr);
  // Returns whether the dataset was created (and needs its other attributes).
  bool write_small(hid_t parent, const std::string& name, const std::string& full_name, hid_t type,
                   const Shape& shape, const void* bytes, size_t size);
  uint32_t write_rows(Dataset& dataset, hid_t type, const std::vector<Tensor>& parts,
                      const std::string& full_name);
  // The rows of a dataset from `source` (a block at a time, in order) or from `in_place`.
  uint32_t write_streamed(Dataset& dataset, hid_t type, const RowSource* source,
                          const RowsInPlace* in_place, const std::string& full_name);
  // Creates the attribute on the first call, overwrites it later.
  void set_attribute(Handle& slot, hid_t object, const char* name, hid_t type, const void* value);
  std::string context(const std::string& object) const;

  hid_t file_;
  Destination destination_;  // of the write in progress
  Handle link_;
  Handle dataset_create_;
  AttributeWriter attributes_;
  Handle step_type_, rng_type_, created_type_;
  Handle variables_, slots_, rng_, iterator_, metadata_;
  std::map<std::string, Dataset> datasets_;  // by full name ("variables/hidden1/kernel")
  std::map<std::string, Handle> root_attributes_;
  bool built_ = false;  // the objects every checkpoint has exist
  std::vector<DirectRange> direct_;
};

// write_checkpoint_file, with the rows of the tensors `sources` and `in_place` name taken
// from them. Returns the ranges of the file written with pwrite, whose CRCs spare a reader of
// the whole file's checksum from reading them back (write_part_file).
std::vector<DirectRange> write_checkpoint_file(const std::string& path, const CheckpointData& data,
                                               const WriteOptions& options,
                                               const RowSources& sources,
                                               const RowsInPlaceSources& in_place = {});

}  // namespace cadre::checkpoint::internal
