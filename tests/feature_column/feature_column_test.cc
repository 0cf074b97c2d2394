// Feature columns: input_layer equal to TensorFlow 2.15's on the same raw batch
// (tools/compat/make_tf_feature_columns.py printed the expected rows), through the per-example
// transform and padded_batch; embedding combiners and linear_model by hand; bad input.
#include "cadre/feature_column/feature_column.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cadre/base/errors.h"
#include "cadre/nn/variable_store.h"

namespace cadre::feature_column {
namespace {

io::Features example(float age, const std::string& city, const std::string& color, int64_t n) {
  return {{"age", Tensor::from_vector(std::vector<float>{age})},
          {"city", io::bytes_tensor(city)},
          {"color", io::bytes_tensor(color)},
          {"n", Tensor::from_vector(std::vector<int64_t>{n})}};
}

// The examples through transform_fn(columns) and padded_batch(size, -1): one batch.
io::Features transformed_batch(std::vector<io::Features> examples,
                               const std::vector<ColumnPtr>& columns) {
  size_t next = 0;
  io::Dataset raw = io::Dataset::from_generator([examples, next]() mutable {
    return next < examples.size() ? std::optional<io::Element>(io::Element{examples[next++]})
                                  : std::nullopt;
  });
  io::Iterator it = raw.map(transform_fn(columns))
                        .padded_batch(static_cast<int64_t>(examples.size()), -1)
                        .make_iterator();
  return it.next()->features;
}

void expect_rows(const Tensor& actual, const std::vector<std::vector<double>>& expected) {
  ASSERT_EQ(actual.shape(), Shape({static_cast<int64_t>(expected.size()),
                                   static_cast<int64_t>(expected[0].size())}));
  std::vector<double> got = actual.to_vector<double>();
  for (size_t r = 0; r < expected.size(); ++r) {
    for (size_t c = 0; c < expected[r].size(); ++c) {
      EXPECT_NEAR(got[r * expected[r].size() + c], expected[r][c], 1e-6) << r << ", " << c;
    }
  }
}

TEST(FeatureColumnTest, InputLayerIsTensorFlowsOnTheSameRawBatch) {
  auto age = numeric_column("age");
  auto age_buckets = bucketized_column(age, {18, 30, 50});
  auto city = categorical_column_with_hash_bucket("city", 10);
  auto color = categorical_column_with_vocabulary_list("color", {"red", "green", "blue"}, 2);
  auto cross = crossed_column({"city", age_buckets}, 20);
  auto n = categorical_column_with_identity("n", 5);
  std::vector<DensePtr> dense = {age,
                                 indicator_column(age_buckets),
                                 indicator_column(city),
                                 indicator_column(color),
                                 indicator_column(cross),
                                 indicator_column(n)};
  EXPECT_EQ(cross->name(), "age_bucketized_X_city");
  io::Features batch =
      transformed_batch({example(25, "paris", "green", 3), example(60, "tokyo", "purple", 0),
                         example(17, "", "red", 4)},
                        {dense.begin(), dense.end()});
  // TensorFlow 2.15.1, columns in name order: age, age_bucketized, age_bucketized_X_city,
  // city, color, n. The empty city is a missing value: no city id, but it takes part in the
  // cross, as in TensorFlow.
  expect_rows(input_layer(batch, dense),
              {{25, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0,  0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0},
               {60, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0,  0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0},
               {17, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                1,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1}});
}

// Lists of strings (tf.train.Example's variable-length bytes features, which TensorFlow holds
// as sparse tensors) through hash buckets, a cross with a dense string and shared embeddings:
// TensorFlow 2.15.1's input_layer on the same batch (make_tf_feature_columns.py, part 2). In a
// list an empty string is a value, not a missing one; the cross takes the list (sparse) first.
TEST(FeatureColumnTest, ListsOfStringsAndSharedEmbeddingsAreTensorFlows) {
  auto example = [](std::vector<std::string> words, const std::string& color,
                    std::vector<std::string> genre) {
    io::Features f{{"color", io::bytes_tensor(color)}};
    io::set_string_list(f, "words", words);
    io::set_string_list(f, "tags", words);
    io::set_string_list(f, "genre", genre);
    return f;
  };
  auto tags = categorical_column_with_vocabulary_list("tags", {"a", "b", "c"}, 1);
  auto genre = categorical_column_with_vocabulary_list("genre", {"x", "y", "z"}, 1);
  std::vector<DensePtr> shared = shared_embeddings({tags, genre}, 2, "sum");
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(shared[0]->name(), "tags_shared_embedding");
  std::vector<DensePtr> dense = {indicator_column(categorical_column_with_hash_bucket("words", 7)),
                                 indicator_column(crossed_column({"words", "color"}, 11)),
                                 shared[0], shared[1]};
  io::Features batch =
      transformed_batch({example({"a", "b"}, "green", {"z"}), example({}, "red", {"x", "q"}),
                         example({"b", "", "zz"}, "blue", {})},
                        {dense.begin(), dense.end()});
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  input_layer(batch, dense);  // creates the shared table, once, under TensorFlow 2's name
  nn::Variable* table = store.find("genre_tags_shared_embedding");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(store.variables().size(), 1u);
  table->assign(Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, Shape{4, 2}));
  // Columns in name order: color_X_words_indicator [11], genre_shared_embedding [2],
  // tags_shared_embedding [2], words_indicator [7].
  expect_rows(input_layer(batch, dense),
              {{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 4, 5, 2, 4, 0, 0, 1, 0, 0, 1, 0},
               {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
               {1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 14, 17, 0, 1, 1, 0, 0, 0, 1}});
  EXPECT_THROW(shared_embeddings({tags, categorical_column_with_hash_bucket("g", 3)}, 2),
               InvalidArgumentError);
  // Two different columns of one key would write their ids under the same name.
  EXPECT_THROW(transform_fn({categorical_column_with_hash_bucket("tags", 7), tags}),
               InvalidArgumentError);
}

// make_parse_example_spec gives TensorFlow's spec for the columns, and tf.train.Example records
// parsed by it go through the columns as the features in memory do.
TEST(FeatureColumnTest, TheParseSpecReadsExamplesForTheColumns) {
  auto age = numeric_column("age", Shape{1}, -1.0);
  auto words = categorical_column_with_hash_bucket("words", 7);
  auto n = weighted_categorical_column(categorical_column_with_identity("n", 5), "w");
  std::vector<ColumnPtr> columns = {bucketized_column(age, {18, 30}),
                                    indicator_column(crossed_column({"words", "color"}, 11)),
                                    indicator_column(n), age};
  io::FeatureSpec spec = make_parse_example_spec(columns);
  ASSERT_EQ(spec.size(), 5u);
  const auto& age_spec = std::get<io::FixedLenFeature>(spec.at("age"));
  EXPECT_EQ(age_spec.shape, Shape{1});
  EXPECT_EQ(age_spec.default_value.to_vector<float>(), std::vector<float>{-1});
  EXPECT_EQ(std::get<io::VarLenFeature>(spec.at("words")).type, io::FeatureType::kBytes);
  EXPECT_EQ(std::get<io::VarLenFeature>(spec.at("color")).type, io::FeatureType::kBytes);
  EXPECT_EQ(std::get<io::VarLenFeature>(spec.at("n")).type, io::FeatureType::kInt64);
  EXPECT_EQ(std::get<io::VarLenFeature>(spec.at("w")).type, io::FeatureType::kFloat);
  EXPECT_THROW(make_parse_example_spec({age, categorical_column_with_hash_bucket("age", 3)}),
               InvalidArgumentError);

  std::vector<std::string> records = {
      io::ExampleBuilder()
          .add_floats("age", {25})
          .add_bytes("words", {"a", "b"})
          .add_bytes("color", {"green"})
          .add_int64s("n", {1, 4})
          .add_floats("w", {0.5f, 2})
          .serialize(),
      io::ExampleBuilder().add_bytes("words", {}).add_bytes("color", {"red"}).serialize()};
  std::vector<io::Features> parsed;
  for (const std::string& record : records) parsed.push_back(io::parse_example(record, spec));
  std::vector<DensePtr> dense = {std::dynamic_pointer_cast<const DenseColumn>(columns[1]),
                                 std::dynamic_pointer_cast<const DenseColumn>(columns[2]), age,
                                 indicator_column(bucketized_column(age, {18, 30}))};
  io::Features batch = transformed_batch(parsed, {dense.begin(), dense.end()});
  // age, age_bucketized (one-hot of 3), color_X_words (11), n_weighted_by_w (5). The second
  // example has no age (the default, -1), no words (no cross), no ids.
  Tensor rows = input_layer(batch, dense);
  std::vector<double> got = rows.to_vector<double>();
  ASSERT_EQ(rows.shape(), (Shape{2, 20}));
  EXPECT_EQ(got[0], 25);
  EXPECT_EQ(got[2], 1);  // 25 in [18, 30)
  double crossed = 0;
  for (int i = 4; i < 15; ++i) crossed += got[i];
  EXPECT_EQ(crossed, 2);  // (a, green) and (b, green)
  EXPECT_EQ(got[15 + 1], 0.5);
  EXPECT_EQ(got[15 + 4], 2);
  EXPECT_EQ(got[20], -1);
  EXPECT_EQ(got[21], 1);  // -1 below 18
  for (int i = 24; i < 40; ++i) EXPECT_EQ(got[i], 0) << i;
}

// Examples of 2, 0 and 1 ids (weighted): sum, mean and sqrtn of the table's rows, zeros for
// the example without ids.
TEST(FeatureColumnTest, EmbeddingsCombineTheirRowsAsTensorFlowsCombiners) {
  auto ids = weighted_categorical_column(categorical_column_with_identity("ids", 4), "w");
  std::vector<io::Features> examples = {{{"ids", Tensor::from_vector(std::vector<int64_t>{1, 3})},
                                         {"w", Tensor::from_vector(std::vector<float>{2, 1})}},
                                        {{"ids", Tensor::from_vector(std::vector<int64_t>{})},
                                         {"w", Tensor::from_vector(std::vector<float>{})}},
                                        {{"ids", Tensor::from_vector(std::vector<int64_t>{2})},
                                         {"w", Tensor::from_vector(std::vector<float>{3})}}};
  io::Features batch = transformed_batch(examples, {ids});
  // Rows: row r = [r, 10 r].
  const Tensor table =
      Tensor::from_vector(std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30}, Shape{4, 2});
  for (const std::string combiner : {"sum", "mean", "sqrtn"}) {
    nn::VariableStore store;
    nn::VariableStoreScope scope(store);
    auto column = embedding_column(ids, 2, combiner);
    column->dense(batch);  // creates the table
    nn::Variable* weights = store.find("ids_weighted_by_w_embedding/embedding_weights");
    ASSERT_NE(weights, nullptr) << combiner;
    weights->assign(table);
    double norm0 = combiner == "sum" ? 1 : combiner == "mean" ? 3 : std::sqrt(5.0);
    double norm2 = combiner == "sum" ? 1 : 3;
    expect_rows(
        column->dense(batch),
        {{(2 * 1 + 3) / norm0, (2 * 10 + 30) / norm0}, {0, 0}, {3 * 2 / norm2, 3 * 20 / norm2}});
  }
}

// max_norm: each row looked up is scaled down to that L2 norm before the combiner, as
// TensorFlow 2.15.1's embedding_column gives on the same lists (make_tf_feature_columns.py,
// part 3); the table's rows are [0.5 r, 0.5 r + 0.5] for r = 0..6.
TEST(FeatureColumnTest, EmbeddingsClipTheirRowsToMaxNorm) {
  auto words = categorical_column_with_hash_bucket("words", 7);
  std::vector<io::Features> examples;
  for (std::vector<std::string> list :
       std::vector<std::vector<std::string>>{{"a", "b"}, {}, {"b", "", "zz"}}) {
    io::Features f;
    io::set_string_list(f, "words", list);
    examples.push_back(std::move(f));
  }
  io::Features batch = transformed_batch(examples, {words});
  std::vector<float> table;
  for (int i = 0; i < 14; ++i) table.push_back(0.5f * static_cast<float>(i));
  for (const std::string combiner : {"mean", "sum"}) {
    nn::VariableStore store;
    nn::VariableStoreScope scope(store);
    auto column = embedding_column(words, 2, combiner, std::nullopt, 1.5);
    column->dense(batch);
    store.find("words_embedding/embedding_weights")
        ->assign(Tensor::from_vector(table, Shape{7, 2}));
    if (combiner == "mean") {
      expect_rows(column->dense(batch),
                  {{0.973025918, 1.14060664}, {0, 0}, {0.928837657, 1.17386127}});
    } else {
      expect_rows(column->dense(batch),
                  {{1.94605184, 2.28121328}, {0, 0}, {2.78651285, 3.5215838}});
    }
  }
  EXPECT_THROW(embedding_column(words, 2, "mean", std::nullopt, 0.0), InvalidArgumentError);
}

TEST(FeatureColumnTest, LinearModelSumsEachColumnsWeightsAndTheBias) {
  auto age = numeric_column("age");
  auto color = categorical_column_with_vocabulary_list("color", {"red", "green", "blue"});
  io::Features batch =
      transformed_batch({example(2, "x", "green", 0), example(-1, "x", "purple", 0)}, {age, color});
  nn::VariableStore store;
  nn::VariableStoreScope scope(store);
  linear_model(batch, {age, color});
  store.find("linear_model/age/weights")
      ->assign(Tensor::from_vector(std::vector<float>{0.5f}, Shape{1, 1}));
  store.find("linear_model/color/weights")
      ->assign(Tensor::from_vector(std::vector<float>{1, 2, 3}, Shape{3, 1}));
  store.find("linear_model/bias_weights")->assign(Tensor::from_vector(std::vector<float>{10}));
  // purple is out of the vocabulary: no id, only age and the bias.
  expect_rows(linear_model(batch, {age, color}), {{0.5 * 2 + 2 + 10}, {0.5 * -1 + 10}});
}

TEST(FeatureColumnTest, BadInputIsAnErrorNamingTheColumn) {
  auto n = categorical_column_with_identity("n", 3);
  io::Features out;
  try {
    n->transform({{"n", Tensor::from_vector(std::vector<int64_t>{7})}}, out);
    FAIL() << "an id outside [0, 3) was taken";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("'n'"), std::string::npos) << error.what();
  }
  EXPECT_NO_THROW(categorical_column_with_identity("n", 3, 0)->transform(
      {{"n", Tensor::from_vector(std::vector<int64_t>{7})}}, out));
  EXPECT_THROW(numeric_column("age")->transform({}, out), InvalidArgumentError);
  EXPECT_NO_THROW(numeric_column("age", Shape{1}, 0.0)->transform({}, out));
  EXPECT_THROW(categorical_column_with_hash_bucket("city", 5)->transform(
                   {{"city", Tensor::from_vector(std::vector<float>{1})}}, out),
               InvalidArgumentError);
  EXPECT_THROW(embedding_column(n, 4, "max"), InvalidArgumentError);
  EXPECT_THROW(bucketized_column(numeric_column("x"), {2, 1}), InvalidArgumentError);
}

}  // namespace
}  // namespace cadre::feature_column
