// Feature columns, as tf.feature_column: how raw features become a model's input, with
// TensorFlow's ids (io/categorical.h) and variable names, so that a model trained there
// reads the same way here.
//
// Two stages. Per example, before batching: transform_fn(columns) turns the raw features
// (numbers, one string as CSV and tf.train.Example give it, a list of strings as
// io::set_string_list leaves a variable-length bytes feature, or an int64 list) into each
// column's values: a numeric column's floats, a categorical column's ids (int64 [k], the
// missing values "" and -1 dropped, as TensorFlow drops them) and weights. Then batch with
// padded_batch(batch_size, /*padding_value=*/-1), so that a padded id is -1: no id. In the
// model_fn: input_layer(features, columns) for a DNN's dense input, linear_model(features,
// columns, units) for a linear model's logits.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/io/categorical.h"
#include "cadre/io/dataset.h"
#include "cadre/io/element.h"
#include "cadre/io/example.h"
#include "cadre/nn/initializers.h"

namespace cadre::feature_column {

class Column {
 public:
  virtual ~Column() = default;
  // TensorFlow's name: the feature key, or derived ("age_bucketized", "a_X_b",
  // "city_embedding"); also the transformed feature's key.
  virtual std::string name() const = 0;
  // Adds this column's per-example values to `out` (transform_fn). InvalidArgumentError
  // naming the column and feature when a feature is missing or of the wrong type.
  virtual void transform(const io::Features& example, io::Features& out) const = 0;
  // The raw features it reads and how a tf.train.Example holds them (TensorFlow's
  // parse_example_spec): numbers as a FixedLenFeature of the column's shape, categorical
  // values as VarLenFeatures.
  virtual void add_parse_spec(io::FeatureSpec& spec) const = 0;
};

// Gives ids in [0, num_buckets()).
class CategoricalColumn : public Column {
 public:
  virtual int64_t num_buckets() const = 0;
  // One example's ids (missing values dropped) and, for a weighted column, their weights.
  virtual void ids(const io::Features& example, std::vector<int64_t>& ids,
                   std::vector<float>* weights) const = 0;
  void transform(const io::Features& example, io::Features& out) const override;
  virtual bool weighted() const { return false; }
};

// Gives a dense [batch, dimension()] tensor.
class DenseColumn : public Column {
 public:
  virtual int64_t dimension() const = 0;
  // From a batch of transformed features.
  virtual Tensor dense(const io::Features& batch) const = 0;
};

using ColumnPtr = std::shared_ptr<const Column>;
using CategoricalPtr = std::shared_ptr<const CategoricalColumn>;
using DensePtr = std::shared_ptr<const DenseColumn>;

// numeric_column: float32 [prod(shape)] per example; a missing feature takes default_value
// (every element) when given, else is an error. normalizer_fn, when set, maps the batch.
std::shared_ptr<const DenseColumn> numeric_column(
    const std::string& key, Shape shape = Shape{1},
    std::optional<double> default_value = std::nullopt,
    std::function<Tensor(const Tensor&)> normalizer_fn = nullptr);
// bucketized_column: each element's bucket among the boundaries (io::bucketize); dense, the
// elements' one-hot vectors side by side; as categorical, element i's bucket + i * buckets.
std::shared_ptr<const CategoricalColumn> bucketized_column(
    const std::shared_ptr<const DenseColumn>& source, std::vector<double> boundaries);

enum class KeyType { kString, kInt64 };
std::shared_ptr<const CategoricalColumn> categorical_column_with_hash_bucket(
    const std::string& key, int64_t hash_bucket_size, KeyType type = KeyType::kString);
std::shared_ptr<const CategoricalColumn> categorical_column_with_vocabulary_list(
    const std::string& key, std::vector<std::string> vocabulary, int64_t num_oov_buckets = 0,
    int64_t default_value = -1);
std::shared_ptr<const CategoricalColumn> categorical_column_with_vocabulary_file(
    const std::string& key, Env& env, const std::string& path, int64_t vocabulary_size = -1,
    int64_t num_oov_buckets = 0, int64_t default_value = -1);
// Integer ids as they are; one outside [0, num_buckets) takes default_value when that is in
// range, else is an InvalidArgumentError (as TensorFlow's).
std::shared_ptr<const CategoricalColumn> categorical_column_with_identity(
    const std::string& key, int64_t num_buckets, int64_t default_value = -1);
// The ids of `categorical`, each weighted by the float at the same position of weight_key.
std::shared_ptr<const CategoricalColumn> weighted_categorical_column(
    const CategoricalPtr& categorical, const std::string& weight_key);
// Every combination of one value per part (a raw feature's key, or a categorical column,
// whose ids take part), hashed (io::cross_hashed) into hash_bucket_size buckets. As in
// TensorFlow, the columns' ids are hashed before the raw features' values (its sparse inputs
// before its dense ones), and a raw feature's missing values take part.
struct CrossPart {
  CrossPart(const char* key) : key(key) {}                         // NOLINT: a raw feature
  CrossPart(std::string key) : key(std::move(key)) {}              // NOLINT
  CrossPart(CategoricalPtr column) : column(std::move(column)) {}  // NOLINT
  std::string key;
  CategoricalPtr column;
};
std::shared_ptr<const CategoricalColumn> crossed_column(std::vector<CrossPart> parts,
                                                        int64_t hash_bucket_size,
                                                        uint64_t hash_key = io::kCrossHashKey);

// The count (or weight) of each id: [batch, num_buckets]. Of a bucketized column, it is
// TensorFlow's bucketized_column used as a dense column, under that column's name.
std::shared_ptr<const DenseColumn> indicator_column(const CategoricalPtr& categorical);
// Rows of <scope>/<categorical>_embedding/embedding_weights [num_buckets, dimension] combined
// per example by "sum", "mean" (weighted) or "sqrtn" (sum over the root of the squared
// weights), zeros for an example without ids; the default initializer is TensorFlow's,
// truncated normal with stddev 1/sqrt(dimension). With max_norm (> 0), each row looked up is
// first scaled down to that L2 norm when its own is larger, as TensorFlow's.
std::shared_ptr<const DenseColumn> embedding_column(
    const CategoricalPtr& categorical, int64_t dimension, const std::string& combiner = "mean",
    std::optional<nn::Initializer> initializer = std::nullopt,
    std::optional<double> max_norm = std::nullopt);

// shared_embeddings (tf.feature_column.shared_embeddings): embedding columns, one per
// categorical column (named <column>_shared_embedding), that look their ids up in one table,
// [num_buckets, dimension], named shared_embedding_collection_name or, by default, the
// columns' names sorted and joined by "_" with "_shared_embedding" appended: TensorFlow 2's
// name, which takes no name scope (canned estimators' checkpoints hold it at the top).
// InvalidArgumentError when the columns' num_buckets differ.
std::vector<DensePtr> shared_embeddings(const std::vector<CategoricalPtr>& categorical,
                                        int64_t dimension, const std::string& combiner = "mean",
                                        std::optional<nn::Initializer> initializer = std::nullopt,
                                        const std::string& shared_embedding_collection_name = "",
                                        std::optional<double> max_norm = std::nullopt);

// make_parse_example_spec: what io::example_parser needs to read every raw feature the
// columns use from tf.train.Example records. InvalidArgumentError naming the key when two
// columns read one key differently.
io::FeatureSpec make_parse_example_spec(const std::vector<ColumnPtr>& columns);

// The Dataset map function that transforms each example for every column (keys of columns
// that share a source are transformed once).
io::Dataset::MapFn transform_fn(std::vector<ColumnPtr> columns);

// The dense columns' outputs, in the order of their names (as TensorFlow's input_layer),
// concatenated: [batch, sum of dimensions]. Variables under the current name scope.
Tensor input_layer(const io::Features& batch, const std::vector<DensePtr>& columns);
// sum over columns of (its dense input or its ids' rows) times
// linear_model/<column>/weights [dimension or num_buckets, units], plus
// linear_model/bias_weights [units]: the logits [batch, units].
Tensor linear_model(const io::Features& batch, const std::vector<ColumnPtr>& columns,
                    int64_t units = 1);

}  // namespace cadre::feature_column
