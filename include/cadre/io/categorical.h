// The ids TensorFlow's categorical feature columns give raw values, bit for bit, so that a
// model trained there keeps its meaning here: hash buckets (FarmHash's Fingerprint64, as
// tf.strings.to_hash_bucket_fast), vocabularies with out-of-vocabulary buckets, bucket
// boundaries (bucketized_column) and hashed crosses (crossed_column, tf.sparse.cross_hashed).
// As in TensorFlow, hash buckets hash an integer's decimal digits, and a cross takes an
// integer as it is. The columns' missing values ("" and -1), which TensorFlow drops before
// any of these, are the caller's to drop. Pure functions and immutable objects: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "cadre/base/env.h"

namespace cadre::io {

// FarmHash's Fingerprint64 (farmhash::Fingerprint64, TensorFlow's tf.fingerprint with
// method "farmhash64" reads it little-endian).
uint64_t fingerprint64(std::string_view bytes);
// TensorFlow's FingerprintCat64: two fingerprints combined, order mattering.
uint64_t fingerprint_cat64(uint64_t first, uint64_t second);

// categorical_column_with_hash_bucket: Fingerprint64(value) mod buckets (buckets > 0, else
// InvalidArgumentError).
int64_t hash_bucket(std::string_view value, int64_t buckets);
int64_t hash_bucket(int64_t value, int64_t buckets);

// categorical_column_with_vocabulary_list and _file: a value's position in the vocabulary;
// a value outside it goes to one of `num_oov_buckets` buckets after the vocabulary (by its
// hash bucket), or, with none, to `default_value` (-1: no id, as TensorFlow's sparse ids
// drop it).
class Vocabulary {
 public:
  // Duplicates are an InvalidArgumentError naming the value, as in TensorFlow; so is an
  // empty vocabulary, a negative num_oov_buckets, or a default_value with buckets.
  explicit Vocabulary(std::vector<std::string> values, int64_t num_oov_buckets = 0,
                      int64_t default_value = -1);
  // One value per line (the line without its end), the first `vocabulary_size` lines (-1:
  // all). NotFoundError naming a missing file; InvalidArgumentError when it has fewer lines.
  static Vocabulary from_file(Env& env, const std::string& path, int64_t vocabulary_size = -1,
                              int64_t num_oov_buckets = 0, int64_t default_value = -1);

  int64_t id(std::string_view value) const;
  int64_t id(int64_t value) const;  // an integer vocabulary's (its values as decimal digits)
  // The number of ids it gives: the vocabulary and the out-of-vocabulary buckets.
  int64_t num_ids() const { return static_cast<int64_t>(values_.size()) + num_oov_buckets_; }

 private:
  // Looked up by string_view without making a string (a lookup per example and column).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> values_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> positions_;
  int64_t num_oov_buckets_ = 0;
  int64_t default_value_ = -1;
};

// bucketized_column: 0 below boundaries[0], i where boundaries[i - 1] <= value <
// boundaries[i], boundaries.size() from the last one up. Boundaries must increase strictly
// (InvalidArgumentError otherwise).
int64_t bucketize(double value, std::span<const double> boundaries);

// crossed_column's hashed cross of one combination of values (one per crossed feature, in
// the column's order): FingerprintCat64 folded from hash_key over each value (a string's
// Fingerprint64, an integer's own bits), mod buckets (TensorFlow's default hash_key:
// kCrossHashKey).
using CrossValue = std::variant<std::string, int64_t>;
inline constexpr uint64_t kCrossHashKey = 0xDECAFCAFFEull;
int64_t cross_hashed(std::span<const CrossValue> values, int64_t buckets,
                     uint64_t hash_key = kCrossHashKey);

}  // namespace cadre::io
