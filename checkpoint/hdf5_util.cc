#include "checkpoint/hdf5_util.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::checkpoint::internal {
namespace {

herr_t collect_error(unsigned depth, const H5E_error2_t* error, void* data) {
  auto* messages = static_cast<std::vector<std::string>*>(data);
  std::string message = error->desc != nullptr ? error->desc : "";
  if (error->func_name != nullptr) message = str_cat(error->func_name, ": ", message);
  messages->push_back(std::move(message));
  return 0;
}

herr_t visit_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  if (info->type != H5L_TYPE_HARD) return 0;
  hid_t object = H5Oopen(group, name, H5P_DEFAULT);
  if (object < 0) return -1;
  if (H5Iget_type(object) == H5I_DATASET) {
    static_cast<std::vector<std::string>*>(data)->push_back(name);
  }
  H5Oclose(object);
  return 0;
}

Handle scalar_space() { return checked(H5Screate(H5S_SCALAR), ErrorCode::kInternal, "H5Screate"); }

// Opens `name` on `object`; an invalid handle when there is no such attribute.
Handle open_attribute(hid_t object, const std::string& name, const std::string& context) {
  quiet_hdf5();
  htri_t exists = H5Aexists(object, name.c_str());
  if (exists < 0) throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot read attributes"));
  if (exists == 0) return Handle();
  return checked(H5Aopen(object, name.c_str(), H5P_DEFAULT), ErrorCode::kDataLoss,
                 str_cat(context, ": cannot open attribute ", name));
}

template <typename T>
std::optional<T> read_numeric_attribute(hid_t object, const std::string& name, hid_t memory_type,
                                        const std::string& context) {
  Handle attribute = open_attribute(object, name, context);
  if (!attribute.valid()) return std::nullopt;
  Handle space = checked(H5Aget_space(attribute.get()), ErrorCode::kDataLoss, context);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw DataLossError(str_cat(context, ": attribute ", name, " is not a single value"));
  }
  T value{};
  if (H5Aread(attribute.get(), memory_type, &value) < 0) {
    throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot read attribute ", name));
  }
  return value;
}

}  // namespace

void quiet_hdf5() {
  thread_local bool quiet = false;
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
}

std::string hdf5_error_detail() {
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
  H5Eclear2(H5E_DEFAULT);
  if (messages.empty()) return "";
  // The outermost call says what was attempted, the innermost why it failed.
  if (messages.size() == 1) return messages[0];
  return str_cat(messages.front(), " (", messages.back(), ")");
}

void throw_hdf5(ErrorCode code, const std::string& context) {
  std::string detail = hdf5_error_detail();
  throw_error(code, detail.empty() ? context : str_cat(context, ": ", detail));
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() { close(); }

bool Handle::close() {
  if (id_ < 0) return true;
  herr_t result;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      result = H5Fclose(id_);
      break;
    case H5I_GROUP:
      result = H5Gclose(id_);
      break;
    case H5I_DATASET:
      result = H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      result = H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      result = H5Tclose(id_);
      break;
    case H5I_ATTR:
      result = H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      result = H5Pclose(id_);
      break;
    default:
      result = H5Idec_ref(id_);
      break;
  }
  id_ = H5I_INVALID_HID;
  return result >= 0;
}

Handle checked(hid_t id, ErrorCode code, const std::string& context) {
  if (id < 0) throw_hdf5(code, context);
  return Handle(id);
}

Handle hdf5_type_for(DType dtype) {
  quiet_hdf5();
  auto copy = [](hid_t type) { return checked(H5Tcopy(type), ErrorCode::kInternal, "H5Tcopy"); };
  switch (dtype) {
    case DType::kFloat32:
      return copy(H5T_IEEE_F32LE);
    case DType::kFloat64:
      return copy(H5T_IEEE_F64LE);
    case DType::kInt32:
      return copy(H5T_STD_I32LE);
    case DType::kInt64:
      return copy(H5T_STD_I64LE);
    case DType::kUInt8:
      return copy(H5T_STD_U8LE);
    case DType::kBFloat16:
      return copy(H5T_STD_U16LE);
    case DType::kFloat16: {
      // IEEE binary16: sign at bit 15, 5 exponent bits at 10 with bias 15, 10 mantissa bits.
      Handle type = copy(H5T_IEEE_F32LE);
      if (H5Tset_fields(type.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_size(type.get(), 2) < 0 ||
          H5Tset_ebias(type.get(), 15) < 0) {
        throw_hdf5(ErrorCode::kInternal, "cannot build the HDF5 half-precision type");
      }
      return type;
    }
    case DType::kBool: {
      Handle type =
          checked(H5Tenum_create(H5T_NATIVE_INT8), ErrorCode::kInternal, "H5Tenum_create");
      int8_t no = 0, yes = 1;
      if (H5Tenum_insert(type.get(), "FALSE", &no) < 0 ||
          H5Tenum_insert(type.get(), "TRUE", &yes) < 0) {
        throw_hdf5(ErrorCode::kInternal, "cannot build the HDF5 boolean type");
      }
      return type;
    }
  }
  throw InternalError(str_cat("no HDF5 type for dtype ", dtype));
}

DType dtype_of_dataset(hid_t dataset, const std::string& context) {
  Handle type = checked(H5Dget_type(dataset), ErrorCode::kDataLoss,
                        str_cat(context, ": cannot read the element type"));
  size_t size = H5Tget_size(type.get());
  std::optional<std::string> name = read_string_attribute(dataset, "dtype", context);
  if (name) {
    DType dtype;
    try {
      dtype = parse_dtype(*name);
    } catch (const InvalidArgumentError&) {
      throw DataLossError(str_cat(context, ": unknown dtype attribute '", *name, "'"));
    }
    if (dtype_size(dtype) != size) {
      throw DataLossError(
          str_cat(context, ": dtype attribute says ", *name, " but elements are ", size, " bytes"));
    }
    return dtype;
  }
  H5T_class_t type_class = H5Tget_class(type.get());
  if (type_class == H5T_FLOAT) {
    if (size == 4) return DType::kFloat32;
    if (size == 8) return DType::kFloat64;
    if (size == 2) return DType::kFloat16;
  } else if (type_class == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
    if (is_signed && size == 4) return DType::kInt32;
    if (is_signed && size == 8) return DType::kInt64;
    if (!is_signed && size == 1) return DType::kUInt8;
  } else if (type_class == H5T_ENUM && size == 1) {
    return DType::kBool;
  }
  throw DataLossError(str_cat(context, ": element type (HDF5 class ", static_cast<int>(type_class),
                              ", ", size, " bytes) has no Cadre dtype"));
}

Handle make_dataspace(const Shape& shape) {
  quiet_hdf5();
  if (shape.rank() == 0) return scalar_space();
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return checked(H5Screate_simple(shape.rank(), dims.data(), nullptr), ErrorCode::kInternal,
                 str_cat("H5Screate_simple ", shape));
}

Shape dataspace_shape(hid_t dataspace, const std::string& context) {
  int rank = H5Sget_simple_extent_ndims(dataspace);
  if (rank < 0 || rank > Shape::kMaxRank) {
    throw DataLossError(str_cat(context, ": unreadable shape (rank ", rank, ")"));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(dataspace, dims.data(), nullptr) < 0) {
    throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": unreadable shape"));
  }
  return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
}

AttributeWriter::AttributeWriter() {
  quiet_hdf5();
  scalar_ = scalar_space();
}

Handle AttributeWriter::create(hid_t object, const std::string& name, hid_t type,
                               const void* value) {
  Handle attribute =
      checked(H5Acreate2(object, name.c_str(), type, scalar_.get(), H5P_DEFAULT, H5P_DEFAULT),
              ErrorCode::kUnavailable, str_cat("cannot create attribute ", name));
  if (H5Awrite(attribute.get(), type, value) < 0) {
    throw_hdf5(ErrorCode::kUnavailable, str_cat("cannot write attribute ", name));
  }
  return attribute;
}

hid_t AttributeWriter::string_type(size_t size) {
  Handle& type = string_types_[size];
  if (!type.valid()) {
    // Fixed-length, stored inside the (checksummed) object header. Variable-length strings
    // would live in HDF5's global heap, which has no checksum: HDF5 1.10 crashes reading a
    // damaged one, and a checkpoint reader must survive any damage.
    type = checked(H5Tcopy(H5T_C_S1), ErrorCode::kInternal, "H5Tcopy");
    H5Tset_size(type.get(), size);
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
  }
  return type.get();
}

void AttributeWriter::write_string(hid_t object, const std::string& name,
                                   const std::string& value) {
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  create(object, name, string_type(padded.size()), padded.data());
}

void AttributeWriter::write_int64(hid_t object, const std::string& name, int64_t value) {
  create(object, name, H5T_STD_I64LE, &value);
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name,
                                                 const std::string& context) {
  Handle attribute = open_attribute(object, name, context);
  if (!attribute.valid()) return std::nullopt;
  Handle type = checked(H5Aget_type(attribute.get()), ErrorCode::kDataLoss, context);
  if (H5Tget_class(type.get()) != H5T_STRING) {
    throw DataLossError(str_cat(context, ": attribute ", name, " is not a string"));
  }
  Handle memory_type = checked(H5Tcopy(H5T_C_S1), ErrorCode::kInternal, "H5Tcopy");
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    H5Tset_cset(memory_type.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attribute.get(), memory_type.get(), &text) < 0) {
      throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot read attribute ", name));
    }
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  size_t size = H5Tget_size(type.get());
  std::string value(size + 1, '\0');
  H5Tset_size(memory_type.get(), size + 1);
  H5Tset_cset(memory_type.get(), H5Tget_cset(type.get()));
  if (H5Aread(attribute.get(), memory_type.get(), value.data()) < 0) {
    throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot read attribute ", name));
  }
  value.resize(std::strlen(value.c_str()));
  return value;
}

std::optional<int64_t> read_int64_attribute(hid_t object, const std::string& name,
                                            const std::string& context) {
  return read_numeric_attribute<int64_t>(object, name, H5T_NATIVE_INT64, context);
}

std::optional<uint32_t> read_uint32_attribute(hid_t object, const std::string& name,
                                              const std::string& context) {
  return read_numeric_attribute<uint32_t>(object, name, H5T_NATIVE_UINT32, context);
}

std::optional<double> read_double_attribute(hid_t object, const std::string& name,
                                            const std::string& context) {
  return read_numeric_attribute<double>(object, name, H5T_NATIVE_DOUBLE, context);
}

std::string attribute_as_text(hid_t object, const std::string& name, const std::string& context) {
  Handle attribute = open_attribute(object, name, context);
  if (!attribute.valid()) return "";
  Handle type = checked(H5Aget_type(attribute.get()), ErrorCode::kDataLoss, context);
  switch (H5Tget_class(type.get())) {
    case H5T_STRING:
      return read_string_attribute(object, name, context).value_or("");
    case H5T_INTEGER:
      return std::to_string(read_int64_attribute(object, name, context).value_or(0));
    case H5T_FLOAT: {
      std::ostringstream text;
      text.precision(17);
      text << read_double_attribute(object, name, context).value_or(0);
      return text.str();
    }
    default:
      return "(unprintable)";
  }
}

std::vector<std::string> attribute_names(hid_t object, const std::string& context) {
  quiet_hdf5();
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->push_back(name);
    return 0;
  };
  hsize_t index = 0;
  if (H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names) < 0) {
    throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot read attributes"));
  }
  return names;
}

Handle create_groups(hid_t parent, const std::string& path, const std::string& context) {
  quiet_hdf5();
  Handle lcpl = checked(H5Pcreate(H5P_LINK_CREATE), ErrorCode::kInternal, "H5Pcreate");
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return checked(H5Gcreate2(parent, path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                 ErrorCode::kUnavailable, str_cat(context, ": cannot create group ", path));
}

std::vector<std::string> list_datasets(hid_t group, const std::string& context) {
  quiet_hdf5();
  std::vector<std::string> names;
  if (H5Lvisit(group, H5_INDEX_NAME, H5_ITER_INC, visit_link, &names) < 0) {
    throw_hdf5(ErrorCode::kDataLoss, str_cat(context, ": cannot list datasets"));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cadre::checkpoint::internal
