// Indicator and embedding columns, and what a model_fn calls: input_layer, linear_model and
// the per-example transform.
#include <algorithm>
#include <cmath>
#include <map>
#include <typeinfo>

#include "cadre/base/errors.h"
#include "cadre/feature_column/feature_column.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "feature_column/raw_values.h"

namespace cadre::feature_column {
namespace {

// A batch's ids of `column` ([batch, k], -1 for none) with their weights (1 where unweighted,
// 0 for no id) and, for lookups, the ids with -1 replaced by 0.
struct BatchIds {
  Tensor safe_ids, weights;
};

// batch_ids of ids on the CPU, in one pass rather than an op each for the mask, the weights
// and the safe ids (a model_fn calls it for every column at every step).
BatchIds host_batch_ids(const Tensor& raw, const Tensor* given_weights) {
  const int64_t batch = raw.shape()[0], k = raw.rank() == 2 ? raw.shape()[1] : 1;
  Tensor ids = raw.contiguous();
  std::vector<float> given;
  if (given_weights) {
    given = internal::floats(*given_weights);
    if (static_cast<int64_t>(given.size()) != batch * k) {
      throw InvalidArgumentError(
          str_cat("feature column weights: ", given.size(), " weights for ", batch * k, " ids"));
    }
  }
  std::vector<int64_t> safe(static_cast<size_t>(batch * k));
  std::vector<float> weights(safe.size());
  const int64_t* p = ids.data<int64_t>();
  for (size_t i = 0; i < safe.size(); ++i) {
    const bool present = p[i] >= 0;
    safe[i] = present ? p[i] : 0;
    weights[i] = present ? (given_weights ? given[i] : 1.0f) : 0.0f;
  }
  return {Tensor::from_vector(safe, Shape{batch, k}),
          Tensor::from_vector(weights, Shape{batch, k})};
}
BatchIds batch_ids(const io::Features& batch, const CategoricalColumn& column) {
  const std::string name = column.name();
  const Tensor& raw = internal::feature(batch, name, name);
  if (raw.dtype() == DType::kInt64 && raw.device().is_cpu() &&
      (raw.rank() == 1 || raw.rank() == 2)) {
    return host_batch_ids(
        raw, column.weighted() ? &internal::feature(batch, name + "/weights", name) : nullptr);
  }
  Tensor ids = cast(raw, DType::kInt64);
  if (ids.rank() == 1) ids = reshape(ids, {-1, 1});
  Tensor present = cast(greater_equal(ids, scalar_like(ids, 0)), DType::kFloat32);
  Tensor weights = present;
  if (column.weighted()) {
    Tensor given =
        cast(internal::feature(batch, column.name() + "/weights", column.name()), DType::kFloat32);
    weights = mul(reshape(given, {ids.shape()[0], ids.shape()[1]}), present);
  }
  Tensor safe = where(greater_equal(ids, scalar_like(ids, 0)), ids, scalar_like(ids, 0));
  return {safe, weights};
}

// The variable of rows looked up by id (an embedding table, a linear model's weights).
nn::Variable& row_table(const std::string& name, Shape shape, const nn::Initializer& initializer) {
  nn::VariableSpec spec;
  spec.name = nn::scoped_name(name);
  spec.shape = shape;
  spec.initializer = initializer;
  spec.row_access = true;
  return nn::current_store().get_or_create(spec);
}

// sum over k of weights[b, k] * table[ids[b, k]]: [batch, columns of table]. With max_norm,
// each row looked up is first scaled to an L2 norm of at most max_norm (TensorFlow's
// clip_by_norm: row * max_norm / max(norm, max_norm)).
Tensor weighted_rows(nn::Variable& table, const BatchIds& ids,
                     std::optional<double> max_norm = std::nullopt) {
  Tensor flat = reshape(ids.safe_ids, {-1});
  Tensor rows = gather(table.read_rows(flat), flat, 0);
  if (max_norm) {
    // The norm's square root starts from a tiny floor: a zero row has no norm to clip, and
    // its gradient would be 0 * inf through sqrt at 0.
    Tensor norm = sqrt(maximum(sum(square(rows), {1}, true), scalar_like(rows, 1e-30)));
    rows =
        div(mul(rows, scalar_like(rows, *max_norm)), maximum(norm, scalar_like(norm, *max_norm)));
  }
  const int64_t batch = ids.safe_ids.shape()[0], k = ids.safe_ids.shape()[1];
  Tensor weighted = mul(reshape(rows, {batch, k, -1}), expand_dims(ids.weights, 2));
  return sum(weighted, {1});
}

class IndicatorColumn : public DenseColumn {
 public:
  explicit IndicatorColumn(CategoricalPtr categorical) : categorical_(std::move(categorical)) {
    // TensorFlow's bucketized_column is itself dense (this output) under its own name.
    std::string inner = categorical_->name();
    name_ = inner.ends_with("_bucketized") ? inner : inner + "_indicator";
  }
  std::string name() const override { return name_; }
  const CategoricalPtr& categorical() const { return categorical_; }
  int64_t dimension() const override { return categorical_->num_buckets(); }
  void add_parse_spec(io::FeatureSpec& spec) const override { categorical_->add_parse_spec(spec); }
  void transform(const io::Features& example, io::Features& out) const override {
    categorical_->transform(example, out);
  }
  Tensor dense(const io::Features& batch) const override {
    BatchIds ids = batch_ids(batch, *categorical_);
    Tensor hot = one_hot(ids.safe_ids, dimension());  // [batch, k, buckets]
    return sum(mul(hot, expand_dims(ids.weights, 2)), {1});
  }

 private:
  CategoricalPtr categorical_;
  std::string name_;
};

class EmbeddingColumn : public DenseColumn {
 public:
  // `shared_table` empty: the column's own table, <name>/embedding_weights under the current
  // name scope; else that variable name as it is (shared_embeddings).
  EmbeddingColumn(CategoricalPtr categorical, int64_t dimension, std::string combiner,
                  nn::Initializer initializer, std::optional<double> max_norm,
                  std::string shared_table = "")
      : categorical_(std::move(categorical)),
        dimension_(dimension),
        combiner_(std::move(combiner)),
        initializer_(std::move(initializer)),
        max_norm_(max_norm),
        shared_table_(std::move(shared_table)),
        name_(categorical_->name() + (shared_table_.empty() ? "_embedding" : "_shared_embedding")) {
  }
  std::string name() const override { return name_; }
  const CategoricalPtr& categorical() const { return categorical_; }
  int64_t dimension() const override { return dimension_; }
  void add_parse_spec(io::FeatureSpec& spec) const override { categorical_->add_parse_spec(spec); }
  void transform(const io::Features& example, io::Features& out) const override {
    categorical_->transform(example, out);
  }
  Tensor dense(const io::Features& batch) const override {
    BatchIds ids = batch_ids(batch, *categorical_);
    Tensor total = weighted_rows(table(), ids, max_norm_);
    if (combiner_ == "sum") return total;
    Tensor norm = combiner_ == "mean" ? sum(ids.weights, {1}, true)
                                      : sqrt(sum(square(ids.weights), {1}, true));
    // An example without ids has norm 0 and a zero sum: zeros, as TensorFlow gives.
    return div(total, maximum(norm, scalar_like(norm, 1e-30)));
  }

 private:
  nn::Variable& table() const {
    const Shape shape{categorical_->num_buckets(), dimension_};
    if (shared_table_.empty()) {
      nn::NameScope scope(name_);
      return row_table("embedding_weights", shape, initializer_);
    }
    nn::VariableSpec spec;
    spec.name = shared_table_;
    spec.shape = shape;
    spec.initializer = initializer_;
    spec.row_access = true;
    return nn::current_store().get_or_create(spec);
  }

  CategoricalPtr categorical_;
  int64_t dimension_;
  std::string combiner_;
  nn::Initializer initializer_;
  std::optional<double> max_norm_;
  std::string shared_table_;
  std::string name_;
};

}  // namespace

std::shared_ptr<const DenseColumn> indicator_column(const CategoricalPtr& categorical) {
  return std::make_shared<IndicatorColumn>(categorical);
}

namespace {

void check_embedding(const std::string& what, int64_t dimension, const std::string& combiner,
                     std::optional<double> max_norm) {
  if (dimension < 1 || (combiner != "sum" && combiner != "mean" && combiner != "sqrtn")) {
    throw InvalidArgumentError(str_cat(what,
                                       ": dimension must be >= 1 and combiner sum, mean or "
                                       "sqrtn; got ",
                                       dimension, " and '", combiner, "'"));
  }
  if (max_norm && !(*max_norm > 0)) {
    throw InvalidArgumentError(str_cat(what, ": max_norm must be positive, got ", *max_norm));
  }
}

nn::Initializer default_embedding_initializer(int64_t dimension) {
  return nn::initializers::truncated_normal(0, 1 / std::sqrt(dimension));
}

}  // namespace

std::shared_ptr<const DenseColumn> embedding_column(const CategoricalPtr& categorical,
                                                    int64_t dimension, const std::string& combiner,
                                                    std::optional<nn::Initializer> initializer,
                                                    std::optional<double> max_norm) {
  check_embedding(str_cat("embedding_column '", categorical->name(), "'"), dimension, combiner,
                  max_norm);
  return std::make_shared<EmbeddingColumn>(
      categorical, dimension, combiner,
      initializer.value_or(default_embedding_initializer(dimension)), max_norm);
}

std::vector<DensePtr> shared_embeddings(const std::vector<CategoricalPtr>& categorical,
                                        int64_t dimension, const std::string& combiner,
                                        std::optional<nn::Initializer> initializer,
                                        const std::string& shared_embedding_collection_name,
                                        std::optional<double> max_norm) {
  if (categorical.empty()) throw InvalidArgumentError("shared_embeddings: no columns");
  std::vector<std::string> names;
  for (const CategoricalPtr& column : categorical) {
    if (column->num_buckets() != categorical[0]->num_buckets()) {
      throw InvalidArgumentError(
          str_cat("shared_embeddings: every column must have the same number of buckets; '",
                  column->name(), "' has ", column->num_buckets(), " and '", categorical[0]->name(),
                  "' ", categorical[0]->num_buckets()));
    }
    names.push_back(column->name());
  }
  std::sort(names.begin(), names.end());
  const std::string table = shared_embedding_collection_name.empty()
                                ? join(names, "_") + "_shared_embedding"
                                : shared_embedding_collection_name;
  check_embedding(str_cat("shared_embeddings '", table, "'"), dimension, combiner, max_norm);
  nn::Initializer init = initializer.value_or(default_embedding_initializer(dimension));
  std::vector<DensePtr> columns;
  for (const CategoricalPtr& column : categorical) {
    columns.push_back(
        std::make_shared<EmbeddingColumn>(column, dimension, combiner, init, max_norm, table));
  }
  return columns;
}

namespace {

bool same_kind(const Column& a, const Column& b) {
  if (&a == &b) return true;
  if (typeid(a) != typeid(b)) return false;
  auto* ca = dynamic_cast<const CategoricalColumn*>(&a);
  auto* cb = dynamic_cast<const CategoricalColumn*>(&b);
  return ca == nullptr || (cb != nullptr && ca->num_buckets() == cb->num_buckets());
}

}  // namespace

io::FeatureSpec make_parse_example_spec(const std::vector<ColumnPtr>& columns) {
  io::FeatureSpec spec;
  for (const ColumnPtr& column : columns) column->add_parse_spec(spec);
  return spec;
}

io::Dataset::MapFn transform_fn(std::vector<ColumnPtr> columns) {
  // Each transformed feature once: an indicator or embedding column transforms as its
  // categorical column, which the list often holds as well.
  // Two different columns of one name (a hash bucket and a vocabulary of the same key) would
  // write their ids under the same key: an error rather than one reading the other's ids.
  // Equal columns built twice (an indicator and an embedding of the same kind) are one.
  std::vector<ColumnPtr> unique;
  std::map<std::string, const Column*> keys;
  for (const ColumnPtr& column : columns) {
    ColumnPtr source = column;
    if (auto* indicator = dynamic_cast<const IndicatorColumn*>(column.get())) {
      source = indicator->categorical();
    } else if (auto* embedding = dynamic_cast<const EmbeddingColumn*>(column.get())) {
      source = embedding->categorical();
    }
    auto [it, added] = keys.emplace(source->name(), source.get());
    if (added) {
      unique.push_back(source);
    } else if (!same_kind(*it->second, *source)) {
      throw InvalidArgumentError(
          str_cat("transform_fn: two different columns are named '", source->name(),
                  "' (their transformed features are keyed by name); build one and use it in "
                  "both places, or give one its own feature key"));
    }
  }
  return [columns = std::move(unique)](io::Element element) {
    io::Features out;
    for (const ColumnPtr& column : columns) column->transform(element.features, out);
    element.features = std::move(out);
    return element;
  };
}

Tensor input_layer(const io::Features& batch, const std::vector<DensePtr>& columns) {
  std::vector<DensePtr> sorted = columns;
  std::sort(sorted.begin(), sorted.end(),
            [](const DensePtr& a, const DensePtr& b) { return a->name() < b->name(); });
  std::vector<Tensor> parts;
  for (const DensePtr& column : sorted) parts.push_back(column->dense(batch));
  if (parts.empty()) throw InvalidArgumentError("input_layer: no columns");
  return concat(parts, 1);
}

Tensor linear_model(const io::Features& batch, const std::vector<ColumnPtr>& columns,
                    int64_t units) {
  nn::NameScope scope("linear_model");
  Tensor logits;
  for (const ColumnPtr& column : columns) {
    nn::NameScope column_scope(column->name());
    Tensor part;
    if (auto categorical = std::dynamic_pointer_cast<const CategoricalColumn>(column)) {
      nn::Variable& weights =
          row_table("weights", Shape{categorical->num_buckets(), units}, nn::initializers::zeros());
      part = weighted_rows(weights, batch_ids(batch, *categorical));
    } else {
      auto dense = std::dynamic_pointer_cast<const DenseColumn>(column);
      nn::Variable& weights =
          nn::get_variable("weights", Shape{dense->dimension(), units}, nn::initializers::zeros());
      part = matmul(dense->dense(batch), weights.read());
    }
    logits = logits.defined() ? add(logits, part) : part;
  }
  if (!logits.defined()) throw InvalidArgumentError("linear_model: no columns");
  nn::Variable& bias = nn::get_variable("bias_weights", Shape{units}, nn::initializers::zeros());
  return add(logits, bias.read());
}

}  // namespace cadre::feature_column
