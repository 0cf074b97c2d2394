#include "feature_column/raw_values.h"

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"

namespace cadre::feature_column::internal {
namespace {

// The raw values as the input pipeline leaves them (on the CPU, contiguous) are read in
// place: transform_fn runs once per example for every column, where an op per value would
// cost more than the column's work.
Tensor host_contiguous(const Tensor& raw) {
  if (raw.device().is_cpu() && raw.is_contiguous()) return raw;
  return raw.to(Device::cpu()).contiguous();
}

template <typename T, typename Fn>
void for_each_as(const Tensor& host, Fn&& fn) {
  const T* p = static_cast<const T*>(host.raw_data());
  for (int64_t i = 0, n = host.numel(); i < n; ++i) fn(p[i]);
}

// Calls fn(value) for every element of a numeric tensor, converted to V.
template <typename V, typename Fn>
bool for_each_number(const Tensor& raw, Fn&& fn) {
  Tensor host = host_contiguous(raw);
  auto as_v = [&](auto x) { fn(static_cast<V>(x)); };
  switch (host.dtype()) {
    case DType::kFloat32:
      for_each_as<float>(host, as_v);
      return true;
    case DType::kFloat64:
      for_each_as<double>(host, as_v);
      return true;
    case DType::kInt64:
      for_each_as<int64_t>(host, as_v);
      return true;
    case DType::kInt32:
      for_each_as<int32_t>(host, as_v);
      return true;
    default:
      return false;
  }
}

}  // namespace

const Tensor& feature(const io::Features& example, const std::string& key,
                      const std::string& column) {
  const Tensor* found = example.find(key);
  if (found == nullptr || !found->defined()) {
    throw InvalidArgumentError(
        str_cat("feature column '", column, "': the example has no feature '", key, "'"));
  }
  return *found;
}

std::string_view string_value(const Tensor& raw, Tensor& host, const std::string& column,
                              const std::string& key) {
  if (raw.dtype() != DType::kUInt8 || raw.rank() != 1) {
    throw InvalidArgumentError(str_cat("feature column '", column, "': feature '", key, "' is ",
                                       raw.dtype(), " ", raw.shape(),
                                       "; expected strings (uint8 [n])"));
  }
  host = host_contiguous(raw);
  return {static_cast<const char*>(host.raw_data()), static_cast<size_t>(host.numel())};
}

void for_each_string(const io::Features& example, const std::string& key,
                     const std::string& lengths_key, const std::string& column, bool keep_missing,
                     const std::function<void(std::string_view)>& fn) {
  const Tensor& raw = feature(example, key, column);
  if (!is_string_list(example, lengths_key)) {
    Tensor host;
    std::string_view text = string_value(raw, host, column, key);
    if (keep_missing || !text.empty()) fn(text);
    return;
  }
  try {
    for (const std::string& s : io::string_list(example, key)) fn(s);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(str_cat("feature column '", column, "': ", e.what()));
  }
}

std::vector<io::CrossValue> categorical_values(const io::Features& example, const std::string& key,
                                               const std::string& lengths_key, bool strings,
                                               const std::string& column, bool keep_missing) {
  std::vector<io::CrossValue> values;
  if (strings) {
    for_each_string(example, key, lengths_key, column, keep_missing,
                    [&](std::string_view text) { values.emplace_back(std::string(text)); });
    return values;
  }
  const Tensor& raw = feature(example, key, column);
  const bool is_integer = raw.dtype() == DType::kInt64 || raw.dtype() == DType::kInt32;
  if (!is_integer) {
    throw InvalidArgumentError(str_cat("feature column '", column, "': feature '", key, "' is ",
                                       raw.dtype(), "; expected integers"));
  }
  for_each_number<int64_t>(raw, [&](int64_t v) {
    if (keep_missing || v != -1) values.emplace_back(v);
  });
  return values;
}

namespace {

std::string describe(const std::variant<io::FixedLenFeature, io::VarLenFeature>& entry) {
  auto type = [](io::FeatureType t) {
    return t == io::FeatureType::kBytes   ? "string"
           : t == io::FeatureType::kFloat ? "float"
                                          : "int64";
  };
  if (const auto* fixed = std::get_if<io::FixedLenFeature>(&entry)) {
    return str_cat("FixedLenFeature(", type(fixed->type), ", ", fixed->shape, ")");
  }
  return str_cat("VarLenFeature(", type(std::get<io::VarLenFeature>(entry).type), ")");
}

bool same_entry(const std::variant<io::FixedLenFeature, io::VarLenFeature>& a,
                const std::variant<io::FixedLenFeature, io::VarLenFeature>& b) {
  if (a.index() != b.index()) return false;
  if (const auto* fa = std::get_if<io::FixedLenFeature>(&a)) {
    const auto& fb = std::get<io::FixedLenFeature>(b);
    return fa->type == fb.type && fa->shape == fb.shape;
  }
  return std::get<io::VarLenFeature>(a).type == std::get<io::VarLenFeature>(b).type;
}

}  // namespace

void add_spec(io::FeatureSpec& spec, const std::string& key,
              std::variant<io::FixedLenFeature, io::VarLenFeature> entry) {
  auto [it, added] = spec.emplace(key, entry);
  if (!added && !same_entry(it->second, entry)) {
    throw InvalidArgumentError(str_cat("make_parse_example_spec: feature '", key, "' is read as ",
                                       describe(it->second), " by one column and as ",
                                       describe(entry), " by another"));
  }
}

std::vector<double> numbers(const Tensor& raw) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(raw.numel()));
  if (!for_each_number<double>(raw, [&](double v) { out.push_back(v); })) {
    return cast(raw, DType::kFloat64).to_vector<double>();  // the other dtypes, as cast takes them
  }
  return out;
}

std::vector<float> floats(const Tensor& raw) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(raw.numel()));
  if (!for_each_number<float>(raw, [&](float v) { out.push_back(v); })) {
    return cast(raw, DType::kFloat32).to_vector<float>();
  }
  return out;
}

}  // namespace cadre::feature_column::internal
