// Wide & deep on a census-like CSV (make_census.py writes one) with the canned estimators, as
// TensorFlow's wide_deep tutorial: categorical columns and a crossed column in the linear
// ("wide") part, numeric columns, indicators and an embedding in the DNN ("deep") part.
//
//   python3 examples/wide_and_deep/make_census.py /tmp/census
//   build/examples/wide_and_deep --data_dir=/tmp/census --model_dir=runs/census
//   {"model":"wide_deep","global_step":2000,"accuracy":0.7,"auc":0.77,...,"train_seconds":4.1}
//
// Trains to --max_steps (resuming from model_dir's newest checkpoint: Cadre's, or
// TensorFlow's of a tf.estimator.DNNLinearCombinedClassifier with these columns), evaluates
// on test.csv and, with --predict_out, writes its probabilities there, one a line.
//
// Under TF_CONFIG, each task plays its role in train_and_evaluate (--strategy, by default on
// the cluster's parameter servers, or MultiWorkerMirrored without ps tasks), and the chief,
// the workers and the evaluator end with the line, "task" first:
//
//   build/tools/cadre_launch --chief=1 --workers=1 --ps=2 --evaluator=1 -- \
//       build/examples/wide_and_deep --data_dir=/tmp/census --model_dir=runs/census_ps
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "cadre/base/errors.h"
#include "cadre/estimator/canned.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/io/csv.h"
#include "cadre/strategies/strategy_from_flags.h"
#include "examples/program_main.h"

DEFINE_string(data_dir, "", "train.csv and test.csv from make_census.py (required)");
DEFINE_string(model_dir, "", "checkpoints and summaries (required)");
DEFINE_string(model, "wide_deep", "wide_deep, wide (linear) or deep (DNN)");
DEFINE_int64(max_steps, 2000, "global step to stop at");
DEFINE_int64(batch_size, 64, "batch size");
DEFINE_int64(save_checkpoints_steps, 1000, "checkpoint interval in steps");
DEFINE_string(predict_out, "", "when set, the test set's probabilities are written here");
DEFINE_uint64(seed, 42, "global seed");
DEFINE_int64(shuffle_buffer, 10000, "training rows shuffled in a buffer of this many; 0: in order");
DEFINE_string(strategy, "",
              "under TF_CONFIG: parameter_server (the default with ps tasks), "
              "multi_worker_mirrored (the default without) or another of strategy_from_flags");

namespace {

using namespace cadre;
namespace fc = cadre::feature_column;

struct Columns {
  std::vector<fc::ColumnPtr> wide, all;
  std::vector<fc::DensePtr> deep;
};

// The columns of tools/compat/check_tf_wide_and_deep.py, which trains the same in TensorFlow.
Columns census_columns() {
  auto age = fc::numeric_column("age");
  auto hours = fc::numeric_column("hours_per_week");
  auto education = fc::categorical_column_with_vocabulary_list(
      "education", {"Preschool", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters",
                    "Prof-school", "Doctorate"});
  auto marital = fc::categorical_column_with_vocabulary_list(
      "marital_status", {"Never-married", "Married", "Divorced", "Widowed"});
  auto occupation = fc::categorical_column_with_hash_bucket("occupation", 50);
  auto age_buckets = fc::bucketized_column(age, {25, 35, 45, 55, 65});
  auto education_x_occupation = fc::crossed_column({"education", "occupation"}, 500);
  auto age_buckets_x_education = fc::crossed_column({age_buckets, "education"}, 100);
  Columns columns;
  columns.wide = {
      education, marital, occupation, age_buckets, education_x_occupation, age_buckets_x_education};
  columns.deep = {age, hours, fc::indicator_column(education), fc::indicator_column(marital),
                  fc::embedding_column(occupation, 8)};
  columns.all = columns.wide;
  columns.all.insert(columns.all.end(), columns.deep.begin(), columns.deep.end());
  return columns;
}

io::Dataset census(const std::string& file, const Columns& columns, bool training,
                   const InputContext& context = InputContext()) {
  io::CsvOptions options;
  options.columns = {{"age"},
                     {"hours_per_week"},
                     {"education", io::CsvType::kString},
                     {"marital_status", io::CsvType::kString},
                     {"occupation", io::CsvType::kString},
                     {"label", io::CsvType::kInt64}};
  options.label_column = "label";
  // Parsed once and kept in memory (as TensorFlow's tutorial keeps its DataFrame); the
  // columns transform each epoch's examples anew, as TensorFlow's do inside its model.
  io::Dataset data = io::csv_dataset({FLAGS_data_dir + "/" + file}, options).cache();
  if (training) {
    data = data.shard(context.num_input_pipelines, context.input_pipeline_id);
    if (FLAGS_shuffle_buffer > 0) data = data.shuffle(FLAGS_shuffle_buffer, FLAGS_seed);
    data = data.repeat();
  }
  return data.map(fc::transform_fn(columns.all)).padded_batch(FLAGS_batch_size, -1).prefetch();
}

Estimator make_estimator(const Columns& columns, RunConfig config) {
  config.model_dir = FLAGS_model_dir;
  config.tf_random_seed = FLAGS_seed;
  config.save_checkpoints_steps = FLAGS_save_checkpoints_steps;
  LinearOptions wide{.feature_columns = columns.wide};
  DnnOptions deep{.hidden_units = {64, 32}, .feature_columns = columns.deep};
  if (FLAGS_model == "wide") return linear_classifier(wide, config);
  if (FLAGS_model == "deep") return dnn_classifier(deep, config);
  return dnn_linear_combined_classifier(wide, deep, config);
}

void write_probabilities(Estimator& estimator, const Columns& columns) {
  std::ofstream out(FLAGS_predict_out);
  Predictions predictions =
      estimator.predict([&](const InputContext&) { return census("test.csv", columns, false); },
                        {.predict_keys = {"logistic"}});
  while (auto p = predictions.next()) {
    char line[32];
    std::snprintf(line, sizeof line, "%.9g\n", p->at("logistic").item<double>());
    out << line;
  }
  if (!out) throw InvalidArgumentError("could not write --predict_out=" + FLAGS_predict_out);
}

void print_metrics(const EvalResult& eval) {
  for (const char* metric : {"accuracy", "auc", "auc_precision_recall", "precision", "recall",
                             "average_loss", "loss", "label/mean", "prediction/mean"}) {
    if (auto value = eval.get(metric)) std::printf(",\"%s\":%.6f", metric, *value);
  }
}

// A task of a cluster: train_and_evaluate in its role.
int run_in_cluster(const Columns& columns, RunConfig config) {
  std::string strategy = FLAGS_strategy;
  if (strategy.empty()) {
    strategy = config.cluster->num_ps_replicas() > 0 ? "parameter_server" : "multi_worker_mirrored";
  }
  config.train_distribute = strategy_from_flags(strategy, "", &*config.cluster);
  Estimator estimator = make_estimator(columns, config);
  EvalSpec eval_spec([&](const InputContext&) { return census("test.csv", columns, false); }, 0);
  eval_spec.start_delay_secs = 0;
  eval_spec.throttle_secs = 0;
  TrainAndEvaluateResult result = train_and_evaluate(
      estimator,
      TrainSpec(
          [&](const InputContext& context) { return census("train.csv", columns, true, context); },
          FLAGS_max_steps),
      eval_spec);
  std::printf("{\"task\":\"%s\",\"model\":\"%s\",\"global_step\":%lld", config.task_type.c_str(),
              FLAGS_model.c_str(),
              static_cast<long long>(result.final_eval.get("global_step").value_or(0)));
  print_metrics(result.final_eval);
  std::printf("}\n");
  return 0;
}

int run() {
  if (FLAGS_data_dir.empty() || FLAGS_model_dir.empty()) {
    throw InvalidArgumentError("--data_dir and --model_dir are required");
  }
  examples::check_flag(FLAGS_model == "wide_deep" || FLAGS_model == "wide" || FLAGS_model == "deep",
                       "model", FLAGS_model, "wide_deep, wide or deep");
  Columns columns = census_columns();
  RunConfig config = RunConfig::from_environment();
  if (config.cluster) return run_in_cluster(columns, config);
  Estimator estimator = make_estimator(columns, config);
  auto start = std::chrono::steady_clock::now();
  int64_t step =
      estimator.train([&](const InputContext&) { return census("train.csv", columns, true); },
                      {.max_steps = FLAGS_max_steps});
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EvalResult eval =
      estimator.evaluate([&](const InputContext&) { return census("test.csv", columns, false); });
  if (!FLAGS_predict_out.empty()) write_probabilities(estimator, columns);
  std::printf("{\"model\":\"%s\",\"global_step\":%lld", FLAGS_model.c_str(),
              static_cast<long long>(step));
  print_metrics(eval);
  std::printf(",\"train_seconds\":%.3f}\n", train_seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::program_main(argc, argv, "wide & deep on a census-like CSV; see main.cc", run);
}
