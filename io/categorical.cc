#include "cadre/io/categorical.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::io {
namespace {

void check_buckets(int64_t buckets, const char* what) {
  if (buckets <= 0) {
    throw InvalidArgumentError(
        str_cat(what, ": the number of buckets must be positive, got ", buckets));
  }
}

// A string enters a cross by its fingerprint, an integer as it is (TensorFlow's sparse cross
// hashes only strings).
uint64_t cross_hash_of(const CrossValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return fingerprint64(*text);
  return static_cast<uint64_t>(std::get<int64_t>(value));
}

}  // namespace

int64_t hash_bucket(std::string_view value, int64_t buckets) {
  check_buckets(buckets, "hash_bucket");
  return static_cast<int64_t>(fingerprint64(value) % static_cast<uint64_t>(buckets));
}

int64_t hash_bucket(int64_t value, int64_t buckets) {
  return hash_bucket(std::to_string(value), buckets);
}

Vocabulary::Vocabulary(std::vector<std::string> values, int64_t num_oov_buckets,
                       int64_t default_value)
    : values_(std::move(values)), num_oov_buckets_(num_oov_buckets), default_value_(default_value) {
  if (values_.empty()) throw InvalidArgumentError("a vocabulary needs at least one value");
  if (num_oov_buckets < 0) {
    throw InvalidArgumentError(str_cat("num_oov_buckets must be >= 0, got ", num_oov_buckets));
  }
  if (num_oov_buckets > 0 && default_value != -1) {
    throw InvalidArgumentError(
        "a vocabulary takes out-of-vocabulary buckets or a default_value, not both");
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!positions_.emplace(values_[i], static_cast<int64_t>(i)).second) {
      throw InvalidArgumentError(str_cat("the vocabulary holds '", values_[i], "' twice"));
    }
  }
}

Vocabulary Vocabulary::from_file(Env& env, const std::string& path, int64_t vocabulary_size,
                                 int64_t num_oov_buckets, int64_t default_value) {
  std::string text = env.read_file(path);
  std::vector<std::string> values;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    values.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  if (vocabulary_size >= 0) {
    if (static_cast<int64_t>(values.size()) < vocabulary_size) {
      throw InvalidArgumentError(str_cat("vocabulary file ", path, " has ", values.size(),
                                         " lines; vocabulary_size is ", vocabulary_size));
    }
    values.resize(static_cast<size_t>(vocabulary_size));
  }
  return Vocabulary(std::move(values), num_oov_buckets, default_value);
}

int64_t Vocabulary::id(std::string_view value) const {
  auto it = positions_.find(value);
  if (it != positions_.end()) return it->second;
  if (num_oov_buckets_ == 0) return default_value_;
  return static_cast<int64_t>(values_.size()) + hash_bucket(value, num_oov_buckets_);
}

int64_t Vocabulary::id(int64_t value) const { return id(std::to_string(value)); }

int64_t bucketize(double value, std::span<const double> boundaries) {
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (!(boundaries[i - 1] < boundaries[i])) {
      throw InvalidArgumentError(str_cat("bucket boundaries must increase: ", boundaries[i],
                                         " follows ", boundaries[i - 1]));
    }
  }
  return std::upper_bound(boundaries.begin(), boundaries.end(), value) - boundaries.begin();
}

int64_t cross_hashed(std::span<const CrossValue> values, int64_t buckets, uint64_t hash_key) {
  check_buckets(buckets, "cross_hashed");
  uint64_t hashed = hash_key;
  for (const CrossValue& value : values) {
    hashed = fingerprint_cat64(hashed, cross_hash_of(value));
  }
  return static_cast<int64_t>(hashed % static_cast<uint64_t>(buckets));
}

}  // namespace cadre::io
