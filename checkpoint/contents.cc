#include "cadre/checkpoint/contents.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

std::string name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.front() == '/' || name.back() == '/') return "starts or ends with '/'";
  for (char c : name) {
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
      return "has a character outside printable ASCII, or '\"' or '\\'";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty()) return "has an empty component ('//')";
    if (part == "." || part == "..") return "has a '.' or '..' component";
    start = end + 1;
  }
  return "";
}

// Whether `a` sorts before `name` + "/" (compared without building that string).
bool before_group_of(std::string_view a, std::string_view name) {
  int c = a.substr(0, name.size()).compare(name);
  if (c != 0) return c < 0;
  return a.size() <= name.size() || a[name.size()] < '/';
}

// Adds a problem for every name that is a '/'-prefix of another in `names` (sorted). Saves
// run this on every checkpoint: it allocates nothing unless there is a problem.
void find_prefix_clashes(std::string_view what, const std::vector<std::string_view>& names,
                         std::vector<std::string>* problems) {
  for (std::string_view name : names) {
    auto it = std::partition_point(names.begin(), names.end(),
                                   [&](std::string_view a) { return before_group_of(a, name); });
    if (it != names.end() && it->size() > name.size() && it->starts_with(name) &&
        (*it)[name.size()] == '/') {
      problems->push_back(str_cat(what, " '", name, "' is also the group of '", *it,
                                  "' (HDF5 cannot hold both: rename one)"));
    }
  }
}

}  // namespace

void check_name(std::string_view what, std::string_view name) {
  std::string problem = name_problem(name);
  if (!problem.empty()) {
    throw InvalidArgumentError(str_cat("checkpoint ", what, " name '", name, "' ", problem));
  }
}

Shape partitioned_shape(const std::vector<Tensor>& parts) {
  if (parts.empty()) throw InvalidArgumentError("partitioned variable with no partitions");
  Shape shape = parts[0].shape();
  int64_t rows = 0;
  for (const Tensor& part : parts) rows += part.rank() > 0 ? part.dim(0) : 0;
  if (shape.rank() > 0) shape.set_dim(0, rows);
  return shape;
}

void check_data(const CheckpointData& data) {
  std::vector<std::string> problems;
  auto check = [&](std::string_view what, std::string_view name) {
    std::string problem = name_problem(name);
    if (!problem.empty()) problems.push_back(str_cat(what, " name '", name, "' ", problem));
  };
  std::vector<std::string_view> variables, slots;
  for (const auto& [name, value] : data.variables) {
    check("variable", name);
    if (!value.defined()) problems.push_back(str_cat("variable '", name, "' has no value"));
    (data.slot_of.count(name) ? slots : variables).push_back(name);
  }
  for (const auto& [name, parts] : data.partitioned_variables) {
    check("variable", name);
    if (data.variables.count(name)) {
      problems.push_back(str_cat("variable '", name, "' is both whole and partitioned"));
    }
    (data.slot_of.count(name) ? slots : variables).push_back(name);
    if (parts.empty())
      problems.push_back(str_cat("partitioned variable '", name, "' has no parts"));
    for (size_t i = 0; i < parts.size(); ++i) {
      const Tensor& part = parts[i];
      if (!part.defined() || part.rank() == 0) {
        problems.push_back(str_cat("partition ", i, " of '", name, "' is undefined or 0-d"));
        continue;
      }
      const Tensor& first = parts[0];
      if (first.defined() && first.rank() > 0 &&
          (part.dtype() != first.dtype() ||
           part.shape().without_dim(0) != first.shape().without_dim(0))) {
        problems.push_back(str_cat("partition ", i, " of '", name, "' is ", part.dtype(), " ",
                                   part.shape(), " but partition 0 is ", first.dtype(), " ",
                                   first.shape(), " (partitions split axis 0 only)"));
      }
    }
  }
  for (const auto& [slot, variable] : data.slot_of) {
    if (!data.variables.count(slot) && !data.partitioned_variables.count(slot)) {
      problems.push_back(str_cat("slot '", slot, "' has no value"));
    }
    if (!data.variables.count(variable) && !data.partitioned_variables.count(variable)) {
      problems.push_back(
          str_cat("slot '", slot, "' belongs to '", variable, "', which is not saved"));
    }
  }
  std::vector<std::string_view> iterator_names;
  for (const auto& [name, value] : data.iterator_state) {
    check("iterator state", name);
    if (!value.defined()) problems.push_back(str_cat("iterator state '", name, "' has no value"));
    iterator_names.push_back(name);
  }
  std::vector<std::string_view> rng_names;
  for (const auto& [name, state] : data.rng_states) {
    check("RNG state", name);
    rng_names.push_back(name);
  }
  for (const auto& [key, value] : data.attributes) check("attribute", key);
  // Whole and partitioned variables are two sorted runs; the maps' keys are sorted already.
  if (!data.partitioned_variables.empty()) {
    std::sort(variables.begin(), variables.end());
    std::sort(slots.begin(), slots.end());
  }
  find_prefix_clashes("variable", variables, &problems);
  find_prefix_clashes("slot", slots, &problems);
  find_prefix_clashes("iterator state", iterator_names, &problems);
  find_prefix_clashes("RNG state", rng_names, &problems);
  if (!problems.empty()) {
    throw InvalidArgumentError(str_cat("cannot save checkpoint: ", join(problems, "; ")));
  }
}

std::string part_dataset_name(const std::string& name, int64_t first_row) {
  return str_cat(name, "/rows-", first_row);
}

Tensor bytes_to_tensor(std::string_view text) {
  return Tensor::from_bytes(text.data(), Shape{static_cast<int64_t>(text.size())}, DType::kUInt8);
}

std::string tensor_to_bytes(const Tensor& tensor) {
  if (tensor.dtype() != DType::kUInt8 || tensor.rank() != 1) {
    throw InvalidArgumentError(
        str_cat("expected a 1-d uint8 tensor of bytes, got ", tensor.dtype(), " ", tensor.shape()));
  }
  std::vector<uint8_t> bytes = tensor.to_vector<uint8_t>();
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace cadre::checkpoint
