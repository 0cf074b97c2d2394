#include "checkpoint/restore_rows.h"

#include <filesystem>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

// `file_name` in `model_dir`, refused unless it is a file there: the name comes over the
// network, from a caller holding the job's secret, who must still not read elsewhere.
std::string file_in(const std::string& model_dir, const std::string& file_name) {
  namespace fs = std::filesystem;
  if (model_dir.empty()) {
    throw FailedPreconditionError(
        str_cat("cannot restore from '", file_name, "': this task has no model_dir"));
  }
  std::string refused = str_cat("checkpoint '", file_name, "' is not a file in model_dir ",
                                model_dir, "; refusing to read it");
  if (file_name.empty() || file_name == "." || file_name == ".." ||
      file_name.find('/') != std::string::npos) {
    throw PermissionDeniedError(refused);
  }
  std::error_code error;
  fs::path dir = fs::canonical(model_dir, error);
  if (error) throw NotFoundError(str_cat("model_dir ", model_dir, ": ", error.message()));
  fs::path file = fs::canonical(dir / file_name, error);
  if (error) {
    throw NotFoundError(str_cat("checkpoint ", (dir / file_name).string(), ": ", error.message()));
  }
  if (file.parent_path() != dir) throw PermissionDeniedError(refused);
  return file.string();
}

}  // namespace

const VariableInfo& restorable(const CheckpointReader& reader, const nn::VariableSpec& spec,
                               const std::string& from) {
  auto found = reader.variables().find(from);
  if (found == reader.variables().end()) {
    throw InvalidArgumentError(
        str_cat("variable '", spec.name, "' is not in checkpoint ", reader.path(),
                from == spec.name ? "" : str_cat(" (looked for '", from, "')"),
                ": the checkpoint holds another model (", reader.variables().size(),
                " variables), or the model changed"));
  }
  const VariableInfo& info = found->second;
  if (info.shape != spec.shape || info.dtype != spec.dtype) {
    throw InvalidArgumentError(str_cat("variable '", spec.name, "' is ", dtype_name(spec.dtype),
                                       " ", spec.shape, " but checkpoint ", reader.path(),
                                       " holds '", from, "' as ", dtype_name(info.dtype), " ",
                                       info.shape));
  }
  return info;
}

void read_own_rows(const std::string& model_dir, const std::string& file_name,
                   const std::string& name, int64_t first_row, const Tensor& destination) {
  std::unique_ptr<CheckpointReader> reader = CheckpointReader::open(file_in(model_dir, file_name));
  const VariableInfo& info = reader->variable(name);
  const Shape& shape = destination.shape();
  bool fits = info.dtype == destination.dtype() && info.shape.rank() == shape.rank();
  for (int d = 1; fits && d < shape.rank(); ++d) fits = info.shape[d] == shape[d];
  if (fits && shape.rank() > 0) {
    fits = first_row >= 0 && first_row + shape[0] <= info.shape[0];
  } else if (fits) {
    fits = first_row == 0;
  }
  if (!fits) {
    throw InvalidArgumentError(str_cat("checkpoint ", reader->path(), " holds '", name, "' as ",
                                       dtype_name(info.dtype), " ", info.shape, "; asked for ",
                                       dtype_name(destination.dtype()), " ", shape, " from row ",
                                       first_row));
  }
  if (shape.rank() == 0) {
    reader->read_into(name, destination, /*verify=*/false);
  } else {
    reader->read_rows_into(name, first_row, destination, /*verify=*/false);
  }
}

}  // namespace cadre::checkpoint
