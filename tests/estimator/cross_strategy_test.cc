// Saving under one strategy and resuming under another: every pair of {OneDevice, Mirrored
// on 2 and on 3 CPU devices, CentralStorage on 2}. The resumed run continues from the saved
// global step with the saved variables, optimizer slots and input position (its losses are
// those of an uninterrupted run), and every checkpoint holds the same logical variables.
#include <gtest/gtest.h>

#include <filesystem>

#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/io/event_file.h"
#include "cadre/ops/array.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/central_storage_strategy.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "tests/estimator/test_model.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

constexpr int64_t kGlobalBatch = 12;

Dataset global_batches(const InputContext& context) {
  auto [x, y] = testing::classification_data(testing::kExamples);
  return Dataset::from_tensor_slices(Features{{"x", x}}, y)
      .shuffle(64, /*seed=*/3)
      .repeat()
      .batch(context.per_replica_batch_size(kGlobalBatch));
}

struct Named {
  std::string name;
  std::shared_ptr<const Strategy> strategy;
};

std::vector<Named> strategies() {
  return {{"one_device", OneDeviceStrategy::create()},
          {"mirrored2", MirroredStrategy::create({Device::cpu(0), Device::cpu(1)})},
          {"mirrored3", MirroredStrategy::create({Device::cpu(0), Device::cpu(1), Device::cpu(2)})},
          {"central2", CentralStorageStrategy::create({Device::cpu(0), Device::cpu(1)})}};
}

class Losses : public Hook {
 public:
  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    by_step[result.global_step] = result.loss;
  }
  std::map<int64_t, double> by_step;
};

class CrossStrategyTest : public cadre::testing::TempDirTest {
 protected:
  std::map<int64_t, double> train(const std::string& dir, std::shared_ptr<const Strategy> strategy,
                                  int64_t max_steps) {
    RunConfig config = testing::test_config(dir, /*save_steps=*/100);
    config.train_distribute = std::move(strategy);
    Estimator estimator(testing::classifier_fn, config, {{"dropout", 0.0}});
    auto losses = std::make_shared<Losses>();
    estimator.train(global_batches, {.max_steps = max_steps, .hooks = {losses}});
    return losses->by_step;
  }
  static std::vector<std::string> names_in(const std::string& checkpoint) {
    std::vector<std::string> names;
    auto reader = checkpoint::CheckpointReader::open(checkpoint);
    for (const auto& [name, info] : reader->variables()) {
      names.push_back(name);
    }
    return names;
  }
};

TEST_F(CrossStrategyTest, EveryPairResumesWhereTheOtherStopped) {
  std::map<int64_t, double> reference = train(path("reference"), OneDeviceStrategy::create(), 16);
  std::vector<std::string> logical = names_in(path("reference") + "/model.ckpt-16.h5");
  for (const Named& from : strategies()) {
    for (const Named& to : strategies()) {
      std::string dir = path(from.name + "_to_" + to.name);
      SCOPED_TRACE(from.name + " -> " + to.name);
      std::map<int64_t, double> first = train(dir, from.strategy, 8);
      std::map<int64_t, double> second = train(dir, to.strategy, 16);
      ASSERT_EQ(first.size(), 8u);
      ASSERT_EQ(second.size(), 8u);
      EXPECT_EQ(second.begin()->first, 9);  // carries on from the saved global step
      for (const auto& [step, loss] : second) {
        EXPECT_NEAR(loss, reference.at(step), 1e-4 * reference.at(step)) << "step " << step;
      }
      EXPECT_EQ(names_in(dir + "/model.ckpt-8.h5"), logical);
      EXPECT_EQ(names_in(dir + "/model.ckpt-16.h5"), logical);
    }
  }
}

// Evaluation under another strategy than training: the metrics of all replicas merged give
// what one device gives, also when the last step has fewer batches than replicas.
TEST_F(CrossStrategyTest, EvaluationMergesTheReplicasMetrics) {
  train(path("model"), MirroredStrategy::create({Device::cpu(0), Device::cpu(1)}), 20);
  auto evaluate = [&](std::shared_ptr<const Strategy> strategy) {
    RunConfig config = testing::test_config(path("model"));
    config.eval_distribute = std::move(strategy);
    Estimator estimator(testing::classifier_fn, config, {{"dropout", 0.0}});
    // 256 examples in batches of 40: 7 batches, the last of 16.
    return estimator.evaluate([](const InputContext&) {
      auto [x, y] = testing::classification_data(256, 100000);
      return Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(40);
    });
  };
  EvalResult one = evaluate(OneDeviceStrategy::create());
  for (const Named& s : strategies()) {
    EvalResult result = evaluate(s.strategy);
    EXPECT_NEAR(result.at("accuracy"), one.at("accuracy"), 1e-12) << s.name;
    EXPECT_EQ(result.at("global_step"), 20);
  }
  EXPECT_GT(one.at("accuracy"), 0.3);
}

// The strategies of a cluster's tasks evaluate a checkpoint on their local devices and
// contact no task (nothing listens at the cluster's addresses): a parameter-server strategy,
// which a coordinator's client and a lone worker evaluate under (it took the restored copies
// for variables on the ps tasks, and the client hung in a pull from them), and
// MultiWorkerMirrored on an evaluator task (it refused to start there).
TEST_F(CrossStrategyTest, TheStrategiesOfAClustersTasksEvaluateOnTheirLocalDevices) {
  train(path("model"), OneDeviceStrategy::create(), 20);
  auto evaluate = [&](std::shared_ptr<const Strategy> strategy) {
    RunConfig config = testing::test_config(path("model"));
    config.eval_distribute = std::move(strategy);
    Estimator estimator(testing::classifier_fn, config, {{"dropout", 0.0}});
    return estimator.evaluate([](const InputContext& context) {
      EXPECT_EQ(context.num_input_pipelines, 1);
      EXPECT_EQ(context.input_pipeline_id, 0);
      auto [x, y] = testing::classification_data(256, 100000);
      return Dataset::from_tensor_slices(Features{{"x", x}}, y).batch(40);
    });
  };
  const std::vector<Device> two = {Device::cpu(0), Device::cpu(1)};
  ClusterConfig client = parse_tf_config(
      R"({"cluster": {"client": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                      "ps": ["127.0.0.1:3"]},
          "task": {"type": "client", "index": 0}})");
  client.security.secret = "a test job's secret";
  ClusterConfig evaluator = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
          "task": {"type": "evaluator", "index": 0}})");
  evaluator.security.secret = "a test job's secret";
  auto on_evaluator = MultiWorkerMirroredStrategy::create(evaluator, two);
  EXPECT_EQ(on_evaluator->num_workers(), 1);
  EXPECT_EQ(on_evaluator->num_local_replicas(), 2);
  // An evaluator has no job secret (RunConfig::from_environment reads none for it): a
  // parameter-server strategy there reaches no ps task and needs none (it refused to start,
  // 'the cluster has no secret', so that a ps job's evaluator failed under cadre_launch).
  ClusterConfig ps_evaluator = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]},
          "task": {"type": "evaluator", "index": 0}})");
  auto ps_on_evaluator = ParameterServerStrategy::create(ps_evaluator, two);

  EvalResult one = evaluate(OneDeviceStrategy::create());
  for (const Named& s : std::vector<Named>{
           {"parameter_server, one device", ParameterServerStrategy::create(client)},
           {"parameter_server, two devices", ParameterServerStrategy::create(client, two)},
           {"multi_worker_mirrored on the evaluator", on_evaluator},
           {"parameter_server on the evaluator", ps_on_evaluator}}) {
    EvalResult result = evaluate(s.strategy);
    EXPECT_NEAR(result.at("accuracy"), one.at("accuracy"), 1e-12) << s.name;
    EXPECT_EQ(result.at("global_step"), 20) << s.name;
  }
}

// Summaries of a step describe the global batch: each replica's value weighted by its
// batch size, as one device computes it.
TEST_F(CrossStrategyTest, ScalarSummariesAreReducedOverTheReplicas) {
  auto fn = [](const Features& f, const Tensor& labels, ModeKeys mode, const Params& p) {
    EstimatorSpec spec = testing::classifier_fn(f, labels, mode, p);
    return spec.with_scalar_summaries({{"mean_label", mean(cast(labels, DType::kFloat32))}});
  };
  auto summaries = [&](const std::string& dir, std::shared_ptr<const Strategy> strategy) {
    RunConfig config = testing::test_config(dir);
    config.train_distribute = std::move(strategy);
    config.save_summary_steps = 1;
    Estimator estimator(fn, config, {{"dropout", 0.0}});
    estimator.train(global_batches, {.max_steps = 5});
    std::map<int64_t, double> values;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.path().filename().string().starts_with("events.out")) continue;
      for (const io::Event& event : io::read_event_file(entry.path().string())) {
        for (const io::SummaryValue& v : event.values) {
          if (v.tag == "mean_label") values[event.step] = *v.scalar;
        }
      }
    }
    return values;
  };
  auto one = summaries(path("one"), OneDeviceStrategy::create());
  auto three = summaries(path("three"), strategies()[2].strategy);
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(three.size(), 5u);
  for (const auto& [step, value] : one) EXPECT_NEAR(three.at(step), value, 1e-6) << step;
}

}  // namespace
}  // namespace cadre
