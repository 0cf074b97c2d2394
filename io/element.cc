#include "cadre/io/element.h"

#include <algorithm>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {

Features::Features(std::initializer_list<value_type> items) {
  for (const auto& [name, tensor] : items) {
    if (contains(name)) {
      throw InvalidArgumentError(str_cat("Features: the name '", name, "' appears twice"));
    }
    set(name, tensor);
  }
}

size_t Features::lower_bound(std::string_view name) const {
  auto it =
      std::lower_bound(items_.begin(), items_.end(), name,
                       [](const value_type& item, std::string_view n) { return item.first < n; });
  return static_cast<size_t>(it - items_.begin());
}

const Tensor* Features::find(std::string_view name) const {
  size_t i = lower_bound(name);
  return i < items_.size() && items_[i].first == name ? &items_[i].second : nullptr;
}

const Tensor& Features::at(std::string_view name) const {
  const Tensor* found = find(name);
  if (found == nullptr) {
    throw InvalidArgumentError(
        str_cat("no feature named '", name, "'; the features are [", join(names()), "]"));
  }
  return *found;
}

Tensor& Features::at(std::string_view name) {
  return const_cast<Tensor&>(static_cast<const Features&>(*this).at(name));
}

void Features::set(std::string name, Tensor value) {
  // The common case appends: sources and parsers add names in order.
  size_t i = items_.empty() || items_.back().first < name ? items_.size() : lower_bound(name);
  if (i < items_.size() && items_[i].first == name) {
    items_[i].second = std::move(value);
  } else {
    items_.emplace(items_.begin() + static_cast<std::ptrdiff_t>(i), std::move(name),
                   std::move(value));
  }
}

bool Features::erase(std::string_view name) {
  size_t i = lower_bound(name);
  if (i >= items_.size() || items_[i].first != name) return false;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
  return true;
}

std::vector<std::string> Features::names() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : *this) out.push_back(item.first);
  return out;
}

Element::Element(Tensor value) { features.set(std::string(kValueFeature), std::move(value)); }

Element::Element(Features f, Tensor l) : features(std::move(f)), labels(std::move(l)) {}

const Tensor& Element::value() const {
  if (features.size() != 1) {
    throw InvalidArgumentError(
        str_cat("Element::value() needs exactly one feature; this element has [",
                join(features.names()), "]"));
  }
  return features.begin()->second;
}

Tensor bytes_tensor(std::string_view bytes) {
  return Tensor::from_bytes(bytes.data(), Shape{static_cast<int64_t>(bytes.size())}, DType::kUInt8);
}

std::string tensor_bytes(const Tensor& tensor) {
  if (tensor.dtype() != DType::kUInt8) {
    throw InvalidArgumentError(str_cat("a byte string is a uint8 tensor, not ", tensor.dtype()));
  }
  Tensor host = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(Device::cpu(0));
  if (host.numel() == 0) return {};
  return std::string(static_cast<const char*>(host.raw_data()), host.nbytes());
}

std::string string_lengths_key(std::string_view name) { return str_cat(name, "/lengths"); }

void set_string_list(Features& features, const std::string& name,
                     const std::vector<std::string>& values) {
  std::string bytes;
  std::vector<int64_t> lengths;
  lengths.reserve(values.size());
  for (const std::string& v : values) {
    bytes += v;
    lengths.push_back(static_cast<int64_t>(v.size()));
  }
  features.set(name, bytes_tensor(bytes));
  features.set(string_lengths_key(name), Tensor::from_vector(lengths));
}

std::vector<std::string> string_list(const Features& features, std::string_view name) {
  const Tensor& raw = features.at(name);
  const Tensor* lengths = features.find(string_lengths_key(name));
  if (raw.dtype() != DType::kUInt8 || raw.rank() != 1 ||
      (lengths != nullptr && (lengths->dtype() != DType::kInt64 || lengths->rank() != 1))) {
    throw InvalidArgumentError(str_cat(
        "feature '", name, "' is ", raw.dtype(), " ", raw.shape(),
        "; expected a string (uint8 [n]) or a list of strings (their bytes end to end, uint8 "
        "[n], and their lengths, int64 [k], as '",
        string_lengths_key(name), "')"));
  }
  std::string bytes = tensor_bytes(raw);
  if (lengths == nullptr) return {std::move(bytes)};
  std::vector<std::string> out;
  size_t at = 0;
  for (int64_t size : lengths->to_vector<int64_t>()) {
    if (size < 0 || static_cast<size_t>(size) > bytes.size() - at) {
      throw InvalidArgumentError(str_cat("feature '", name, "': its lengths add up to more than ",
                                         "its ", bytes.size(), " bytes"));
    }
    out.emplace_back(bytes.data() + at, static_cast<size_t>(size));
    at += static_cast<size_t>(size);
  }
  if (at != bytes.size()) {
    throw InvalidArgumentError(str_cat("feature '", name, "': its lengths add up to ", at,
                                       " of its ", bytes.size(), " bytes"));
  }
  return out;
}

}  // namespace cadre::io
