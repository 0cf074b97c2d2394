// Numeric and bucketized columns, and hashed crosses: the columns built on numbers and on
// other columns.
#include <algorithm>

#include "cadre/base/errors.h"
#include "cadre/feature_column/feature_column.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "core/base/strings.h"
#include "feature_column/raw_values.h"

namespace cadre::feature_column {
namespace {

class NumericColumn : public DenseColumn {
 public:
  NumericColumn(std::string key, Shape shape, std::optional<double> default_value,
                std::function<Tensor(const Tensor&)> normalizer)
      : key_(std::move(key)),
        shape_(shape),
        default_(default_value),
        normalizer_(std::move(normalizer)) {}
  std::string name() const override { return key_; }
  int64_t dimension() const override { return shape_.num_elements(); }
  void add_parse_spec(io::FeatureSpec& spec) const override {
    Tensor fallback;
    if (default_) fallback = Tensor::full(shape_, *default_, DType::kFloat32);
    internal::add_spec(spec, key_, io::FixedLenFeature(io::FeatureType::kFloat, shape_, fallback));
  }

  void transform(const io::Features& example, io::Features& out) const override {
    out.set(key_, values(example));
  }
  Tensor dense(const io::Features& batch) const override {
    Tensor x =
        reshape(cast(internal::feature(batch, key_, key_), DType::kFloat32), {-1, dimension()});
    return normalizer_ ? normalizer_(x) : x;
  }
  // One example's float32 [dimension].
  Tensor values(const io::Features& example) const {
    const Tensor& raw = checked(example);
    if (!raw.defined()) return Tensor::full(Shape{dimension()}, *default_, DType::kFloat32);
    if (raw.dtype() == DType::kFloat32 && raw.rank() == 1 && raw.device().is_cpu()) return raw;
    return Tensor::from_vector(internal::floats(raw));
  }
  // The same values as floats (what TensorFlow bucketizes: the feature cast to float32).
  std::vector<float> floats(const io::Features& example) const {
    const Tensor& raw = checked(example);
    if (!raw.defined()) return std::vector<float>(dimension(), static_cast<float>(*default_));
    return internal::floats(raw);
  }

 private:
  std::string key_;
  Shape shape_;
  std::optional<double> default_;
  std::function<Tensor(const Tensor&)> normalizer_;

  // The example's feature with dimension() values, or an undefined tensor when it is missing
  // and there is a default.
  const Tensor& checked(const io::Features& example) const {
    static const Tensor kMissing;
    const Tensor* found = example.find(key_);
    if ((found == nullptr || !found->defined()) && default_) return kMissing;
    const Tensor& raw = internal::feature(example, key_, key_);
    if (raw.numel() != dimension()) {
      throw InvalidArgumentError(str_cat("numeric_column '", key_, "': ", raw.numel(),
                                         " values; expected ", dimension(), " (shape ", shape_,
                                         ")"));
    }
    return raw;
  }
};

class BucketizedColumn : public CategoricalColumn {
 public:
  BucketizedColumn(std::shared_ptr<const NumericColumn> source, std::vector<double> boundaries)
      : source_(std::move(source)),
        boundaries_(std::move(boundaries)),
        name_(source_->name() + "_bucketized") {
    io::bucketize(0, boundaries_);  // checks that they increase
  }
  std::string name() const override { return name_; }
  void add_parse_spec(io::FeatureSpec& spec) const override { source_->add_parse_spec(spec); }
  int64_t buckets_per_element() const { return static_cast<int64_t>(boundaries_.size()) + 1; }
  int64_t num_buckets() const override { return source_->dimension() * buckets_per_element(); }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>*) const override {
    std::vector<float> values = source_->floats(example);
    for (size_t i = 0; i < values.size(); ++i) {
      ids.push_back(io::bucketize(values[i], boundaries_) +
                    static_cast<int64_t>(i) * buckets_per_element());
    }
  }

 private:
  std::shared_ptr<const NumericColumn> source_;
  std::vector<double> boundaries_;
  std::string name_;
};

class CrossedColumn : public CategoricalColumn {
 public:
  CrossedColumn(std::vector<CrossPart> parts, int64_t buckets, uint64_t hash_key)
      : parts_(std::move(parts)), buckets_(buckets), hash_key_(hash_key) {
    for (const CrossPart& part : parts_) {
      lengths_keys_.push_back(part.column ? "" : io::string_lengths_key(part.key));
    }
    std::vector<std::string> names;
    for (const CrossPart& part : parts_)
      names.push_back(part.column ? part.column->name() : part.key);
    std::sort(names.begin(), names.end());  // TensorFlow's name sorts the keys
    name_ = join(names, "_X_");
  }
  std::string name() const override { return name_; }
  int64_t num_buckets() const override { return buckets_; }
  // A raw feature in a cross is a string list, as TensorFlow's spec has it.
  void add_parse_spec(io::FeatureSpec& spec) const override {
    for (const CrossPart& part : parts_) {
      if (part.column) {
        part.column->add_parse_spec(spec);
      } else {
        internal::add_spec(spec, part.key, io::VarLenFeature{io::FeatureType::kBytes});
      }
    }
  }
  void ids(const io::Features& example, std::vector<int64_t>& ids,
           std::vector<float>*) const override {
    // TensorFlow's sparse cross takes its sparse inputs (the columns' ids, lists of strings)
    // before the dense ones (one string, numbers): the parts are hashed in that order, each
    // group as given.
    std::vector<std::vector<io::CrossValue>> values;
    for (bool sparse : {true, false}) {
      for (size_t i = 0; i < parts_.size(); ++i) {
        const bool is_sparse =
            parts_[i].column || internal::is_string_list(example, lengths_keys_[i]);
        if (is_sparse == sparse) values.push_back(part_values(example, i));
      }
    }
    std::vector<io::CrossValue> combination(parts_.size());
    expand(values, 0, combination, ids);
  }

 private:
  std::vector<io::CrossValue> part_values(const io::Features& example, size_t i) const {
    const CrossPart& part = parts_[i];
    if (!part.column) {
      const Tensor& raw = internal::feature(example, part.key, name_);
      return internal::categorical_values(example, part.key, lengths_keys_[i],
                                          raw.dtype() == DType::kUInt8, name_,
                                          /*keep_missing=*/true);
    }
    std::vector<int64_t> part_ids;
    part.column->ids(example, part_ids, nullptr);
    return {part_ids.begin(), part_ids.end()};
  }
  // Every combination in row-major order of the parts, as TensorFlow's sparse cross.
  void expand(const std::vector<std::vector<io::CrossValue>>& values, size_t part,
              std::vector<io::CrossValue>& combination, std::vector<int64_t>& ids) const {
    if (part == values.size()) {
      ids.push_back(io::cross_hashed(combination, buckets_, hash_key_));
      return;
    }
    for (const io::CrossValue& v : values[part]) {
      combination[part] = v;
      expand(values, part + 1, combination, ids);
    }
  }

  std::vector<CrossPart> parts_;
  std::vector<std::string> lengths_keys_;  // of the raw features' string lists
  int64_t buckets_;
  uint64_t hash_key_;
  std::string name_;
};

}  // namespace

std::shared_ptr<const DenseColumn> numeric_column(
    const std::string& key, Shape shape, std::optional<double> default_value,
    std::function<Tensor(const Tensor&)> normalizer_fn) {
  if (shape.num_elements() < 1) {
    throw InvalidArgumentError(
        str_cat("numeric_column '", key, "': shape ", shape, " has no elements"));
  }
  return std::make_shared<NumericColumn>(key, shape, default_value, std::move(normalizer_fn));
}

std::shared_ptr<const CategoricalColumn> bucketized_column(
    const std::shared_ptr<const DenseColumn>& source, std::vector<double> boundaries) {
  auto numeric = std::dynamic_pointer_cast<const NumericColumn>(source);
  if (!numeric || boundaries.empty()) {
    throw InvalidArgumentError(
        "bucketized_column: the source must be a numeric_column and "
        "there must be at least one boundary");
  }
  return std::make_shared<BucketizedColumn>(numeric, std::move(boundaries));
}

std::shared_ptr<const CategoricalColumn> crossed_column(std::vector<CrossPart> parts,
                                                        int64_t hash_bucket_size,
                                                        uint64_t hash_key) {
  if (parts.size() < 2 || hash_bucket_size < 1) {
    throw InvalidArgumentError("crossed_column: at least two parts and hash_bucket_size >= 1");
  }
  return std::make_shared<CrossedColumn>(std::move(parts), hash_bucket_size, hash_key);
}

}  // namespace cadre::feature_column
