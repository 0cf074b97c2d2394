// Internal to the checkpoint module: the HDF5 adapter. Owns HDF5 handles, maps Cadre
// dtypes to HDF5 types that h5py and h5dump understand, reads and writes attributes, and
// turns HDF5's error stack into Cadre's typed errors naming the file and the object.
//
// HDF5 is built thread-safe on Debian (one library-wide lock); its error stack is per
// thread, so every entry point calls quiet_hdf5() to keep HDF5 from printing on its own.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/dtype.h"
#include "cadre/tensor/shape.h"

namespace cadre::checkpoint::internal {

// Turns off HDF5's automatic error printing for the calling thread (idempotent, cheap).
void quiet_hdf5();

// The innermost messages of the calling thread's HDF5 error stack, e.g.
// "H5Dread: checksum error"; empty when the stack is empty.
std::string hdf5_error_detail();

// Throws `code`'s error with "<context>: <HDF5 detail>".
[[noreturn]] void throw_hdf5(ErrorCode code, const std::string& context);

// An owned HDF5 identifier (file, group, dataset, dataspace, type, attribute, property
// list), closed with the matching H5*close when destroyed.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  // Closes now and reports whether HDF5 succeeded (closing a file flushes it).
  bool close();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Wraps `id`, throwing `code`'s error with `context` when it is negative.
Handle checked(hid_t id, ErrorCode code, const std::string& context);

// The HDF5 type a Cadre dtype is stored as (also used as the memory type):
//   float32/64 -> IEEE little-endian floats; float16 -> IEEE half (a 16-bit float type with
//   h5py's layout); int32/64 -> signed little-endian; uint8 -> unsigned byte;
//   bool -> enum of int8 {FALSE = 0, TRUE = 1}, the type h5py uses for numpy bool;
//   bfloat16 -> unsigned 16-bit integers holding the bits (the dataset's "dtype" attribute
//   says "bfloat16"; see FORMAT.md).
Handle hdf5_type_for(DType dtype);
// The dtype of a stored dataset: its "dtype" attribute when present, else inferred from the
// HDF5 type. Throws DataLossError naming `context` when neither makes sense.
DType dtype_of_dataset(hid_t dataset, const std::string& context);

Handle make_dataspace(const Shape& shape);
Shape dataspace_shape(hid_t dataspace, const std::string& context);

// Attributes on any object. Strings are written fixed-length UTF-8 (h5py reads them as
// bytes); both fixed- and variable-length strings are read.
// Writes scalar attributes, reusing one dataspace and one string type per length across
// its calls (a file's hundred attributes would otherwise make and close as many of each).
class AttributeWriter {
 public:
  AttributeWriter();
  void write_string(hid_t object, const std::string& name, const std::string& value);
  void write_int64(hid_t object, const std::string& name, int64_t value);
  // Creates scalar attribute `name` of HDF5 type `type` holding `value`, and returns it
  // open (to be overwritten later with H5Awrite).
  Handle create(hid_t object, const std::string& name, hid_t type, const void* value);
  // The fixed-length UTF-8 string type of `size` bytes that write_string uses.
  hid_t string_type(size_t size);

 private:
  Handle scalar_;
  std::map<size_t, Handle> string_types_;
};
// nullopt when the attribute is missing; DataLossError naming `context` when unreadable.
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name,
                                                 const std::string& context);
std::optional<int64_t> read_int64_attribute(hid_t object, const std::string& name,
                                            const std::string& context);
std::optional<uint32_t> read_uint32_attribute(hid_t object, const std::string& name,
                                              const std::string& context);
std::optional<double> read_double_attribute(hid_t object, const std::string& name,
                                            const std::string& context);
// Any scalar string, integer or float attribute as text.
std::string attribute_as_text(hid_t object, const std::string& name, const std::string& context);
std::vector<std::string> attribute_names(hid_t object, const std::string& context);

// Creates the groups of '/'-separated `path` below `parent` that do not exist yet and
// returns the innermost.
Handle create_groups(hid_t parent, const std::string& path, const std::string& context);

// Paths of all datasets below `group` ("hidden1/kernel"), sorted.
std::vector<std::string> list_datasets(hid_t group, const std::string& context);

}  // namespace cadre::checkpoint::internal
