// The categorical columns: what ids each gives one example, as TensorFlow's do.
#include "cadre/base/errors.h"
#include "cadre/feature_column/feature_column.h"
#include "core/base/strings.h"
#include "feature_column/raw_values.h"

namespace cadre::feature_column {

using internal::categorical_values;
using internal::feature;

void CategoricalColumn::transform(const io::Features& example, io::Features& out) const {
  std::vector<int64_t> found;
  std::vector<float> weights;
  ids(example, found, weighted() ? &weights : nullptr);
  out.set(name(), Tensor::from_vector(found));
  if (weighted()) out.set(name() + "/weights", Tensor::from_vector(weights));
}

namespace {

class HashBucketColumn : public CategoricalColumn {
 public:
  HashBucketColumn(std::string key, int64_t buckets, KeyType type)
      : key_(std::move(key)),
        lengths_key_(io::string_lengths_key(key_)),
        buckets_(buckets),
        type_(type) {}
  std::string name() const override { return key_; }
  int64_t num_buckets() const override { return buckets_; }
  void add_parse_spec(io::FeatureSpec& spec) const override {
    internal::add_spec(spec, key_,
                       io::VarLenFeature{type_ == KeyType::kString ? io::FeatureType::kBytes
                                                                   : io::FeatureType::kInt64});
  }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>*) const override {
    if (type_ == KeyType::kString) {
      internal::for_each_string(
          example, key_, lengths_key_, key_, false,
          [&](std::string_view text) { ids.push_back(io::hash_bucket(text, buckets_)); });
      return;
    }
    for (const io::CrossValue& v : categorical_values(example, key_, lengths_key_, false, key_)) {
      ids.push_back(io::hash_bucket(std::get<int64_t>(v), buckets_));
    }
  }

 private:
  std::string key_, lengths_key_;
  int64_t buckets_;
  KeyType type_;
};

class VocabularyColumn : public CategoricalColumn {
 public:
  VocabularyColumn(std::string key, io::Vocabulary vocabulary)
      : key_(std::move(key)),
        lengths_key_(io::string_lengths_key(key_)),
        vocabulary_(std::move(vocabulary)) {}
  std::string name() const override { return key_; }
  int64_t num_buckets() const override { return vocabulary_.num_ids(); }
  // A vocabulary of strings (TensorFlow infers the dtype from the vocabulary's values).
  void add_parse_spec(io::FeatureSpec& spec) const override {
    internal::add_spec(spec, key_, io::VarLenFeature{io::FeatureType::kBytes});
  }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>*) const override {
    if (feature(example, key_, key_).dtype() == DType::kUInt8) {
      internal::for_each_string(example, key_, lengths_key_, key_, false,
                                [&](std::string_view text) {
                                  int64_t id = vocabulary_.id(text);
                                  if (id >= 0) ids.push_back(id);
                                });
      return;
    }
    for (const io::CrossValue& v : categorical_values(example, key_, lengths_key_, false, key_)) {
      int64_t id = vocabulary_.id(std::get<int64_t>(v));
      if (id >= 0) ids.push_back(id);
    }
  }

 private:
  std::string key_, lengths_key_;
  io::Vocabulary vocabulary_;
};

class IdentityColumn : public CategoricalColumn {
 public:
  IdentityColumn(std::string key, int64_t buckets, int64_t default_value)
      : key_(std::move(key)), buckets_(buckets), default_(default_value) {}
  std::string name() const override { return key_; }
  int64_t num_buckets() const override { return buckets_; }
  void add_parse_spec(io::FeatureSpec& spec) const override {
    internal::add_spec(spec, key_, io::VarLenFeature{io::FeatureType::kInt64});
  }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>*) const override {
    for (const io::CrossValue& v : categorical_values(example, key_, "", false, key_)) {
      int64_t id = std::get<int64_t>(v);
      if (id < 0 || id >= buckets_) {
        if (default_ < 0 || default_ >= buckets_) {
          throw InvalidArgumentError(
              str_cat("feature column '", key_, "': id ", id, " is outside [0, ", buckets_, ")"));
        }
        id = default_;
      }
      ids.push_back(id);
    }
  }

 private:
  std::string key_;
  int64_t buckets_, default_;
};

class WeightedColumn : public CategoricalColumn {
 public:
  WeightedColumn(CategoricalPtr categorical, std::string weight_key)
      : categorical_(std::move(categorical)),
        weight_key_(std::move(weight_key)),
        name_(str_cat(categorical_->name(), "_weighted_by_", weight_key_)) {}
  std::string name() const override { return name_; }
  int64_t num_buckets() const override { return categorical_->num_buckets(); }
  void add_parse_spec(io::FeatureSpec& spec) const override {
    categorical_->add_parse_spec(spec);
    internal::add_spec(spec, weight_key_, io::VarLenFeature{io::FeatureType::kFloat});
  }
  bool weighted() const override { return true; }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>* weights) const override {
    categorical_->ids(example, ids, nullptr);
    std::vector<float> given = internal::floats(feature(example, weight_key_, name_));
    if (given.size() != ids.size()) {
      throw InvalidArgumentError(str_cat("feature column '", name_, "': ", given.size(),
                                         " weights for ", ids.size(), " ids"));
    }
    if (weights) *weights = std::move(given);
  }

 private:
  CategoricalPtr categorical_;
  std::string weight_key_;
  std::string name_;
};

}  // namespace

std::shared_ptr<const CategoricalColumn> categorical_column_with_hash_bucket(
    const std::string& key, int64_t hash_bucket_size, KeyType type) {
  if (hash_bucket_size < 1) {
    throw InvalidArgumentError(str_cat("categorical_column_with_hash_bucket '", key,
                                       "': hash_bucket_size must be >= 1, got ", hash_bucket_size));
  }
  return std::make_shared<HashBucketColumn>(key, hash_bucket_size, type);
}

std::shared_ptr<const CategoricalColumn> categorical_column_with_vocabulary_list(
    const std::string& key, std::vector<std::string> vocabulary, int64_t num_oov_buckets,
    int64_t default_value) {
  return std::make_shared<VocabularyColumn>(
      key, io::Vocabulary(std::move(vocabulary), num_oov_buckets, default_value));
}

std::shared_ptr<const CategoricalColumn> categorical_column_with_vocabulary_file(
    const std::string& key, Env& env, const std::string& path, int64_t vocabulary_size,
    int64_t num_oov_buckets, int64_t default_value) {
  return std::make_shared<VocabularyColumn>(
      key, io::Vocabulary::from_file(env, path, vocabulary_size, num_oov_buckets, default_value));
}

std::shared_ptr<const CategoricalColumn> categorical_column_with_identity(const std::string& key,
                                                                          int64_t num_buckets,
                                                                          int64_t default_value) {
  if (num_buckets < 1) {
    throw InvalidArgumentError(str_cat("categorical_column_with_identity '", key,
                                       "': num_buckets must be >= 1, got ", num_buckets));
  }
  return std::make_shared<IdentityColumn>(key, num_buckets, default_value);
}

std::shared_ptr<const CategoricalColumn> weighted_categorical_column(
    const CategoricalPtr& categorical, const std::string& weight_key) {
  return std::make_shared<WeightedColumn>(categorical, weight_key);
}

}  // namespace cadre::feature_column
