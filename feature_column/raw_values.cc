#include "feature_column/raw_values.h"

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"

namespace cadre::feature_column::internal {

const Tensor& feature(const io::Features& example, const std::string& key,
                      const std::string& column) {
  const Tensor* found = example.find(key);
  if (found == nullptr || !found->defined()) {
    throw InvalidArgumentError(
        str_cat("feature column '", column, "': the example has no feature '", key, "'"));
  }
  return *found;
}

std::vector<io::CrossValue> categorical_values(const Tensor& raw, bool strings,
                                               const std::string& column, const std::string& key,
                                               bool keep_missing) {
  const bool is_integer = raw.dtype() == DType::kInt64 || raw.dtype() == DType::kInt32;
  std::vector<io::CrossValue> values;
  if (strings) {
    if (raw.dtype() != DType::kUInt8 || raw.rank() != 1) {
      throw InvalidArgumentError(str_cat("feature column '", column, "': feature '", key, "' is ",
                                         raw.dtype(), " ", raw.shape(),
                                         "; expected a string (uint8 [n])"));
    }
    Tensor bytes = raw.to(Device::cpu()).contiguous();
    std::string text(static_cast<const char*>(bytes.raw_data()), static_cast<size_t>(raw.numel()));
    if (keep_missing || !text.empty()) values.emplace_back(std::move(text));
    return values;
  }
  if (!is_integer) {
    throw InvalidArgumentError(str_cat("feature column '", column, "': feature '", key, "' is ",
                                       raw.dtype(), "; expected integers"));
  }
  for (int64_t v : cast(raw, DType::kInt64).to_vector<int64_t>()) {
    if (keep_missing || v != -1) values.emplace_back(v);
  }
  return values;
}

std::vector<double> numbers(const Tensor& raw) {
  return cast(raw, DType::kFloat64).to_vector<double>();
}

}  // namespace cadre::feature_column::internal
