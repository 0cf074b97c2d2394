// ParameterServerStrategy against ps tasks on 127.0.0.1 in this process: training as one
// device does, a worker that waits for the chief, moving statistics every worker moves,
// embeddings that pull and push only the rows looked up, and the traffic it reports.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/strategy_extended.h"
#include "tests/strategies/ps_servers.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

struct Cluster {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  std::string json(const std::string& task, int workers = 0) const {
    std::string ps;
    for (const auto& s : servers) ps += (ps.empty() ? "\"" : ", \"") + s->address() + "\"";
    std::string worker_list;
    for (int i = 0; i < workers; ++i) {
      worker_list +=
          (i ? ", \"" : "\"") + std::string("127.0.0.1:") + std::to_string(40000 + i) + "\"";
    }
    return R"({"cluster": {"chief": ["127.0.0.1:39999"], "worker": [)" + worker_list +
           R"(], "ps": [)" + ps + R"(]}, "task": )" + task + "}";
  }
};

// A task's config in `json`, with the job's secret.
ClusterConfig configured(const std::string& json) {
  ClusterConfig config = parse_tf_config(json);
  config.security = testing::test_security();
  return config;
}

Cluster start_servers(int count) { return {testing::start_ps_servers(count)}; }

ParameterServerOptions small_slices() {
  ParameterServerOptions options;
  options.placement.min_slice_bytes = 256;  // slice even this small model
  options.init_timeout_seconds = 30;
  options.connect_timeout_seconds = 10;
  return options;
}

// The strategy of `task` in `cluster` with one worker beside the chief.
std::shared_ptr<ParameterServerStrategy> strategy_of(const Cluster& cluster, const char* task) {
  return ParameterServerStrategy::create(configured(cluster.json(task, 1)), {Device::cpu(0)},
                                         small_slices());
}

// `steps` steps of a small regression model with Adam on `strategy`, on 8 rows a step; with
// batch norm (whose moving statistics are non-trainable variables) after the hidden layer.
void train(const Strategy& strategy, DistributedVariables& variables, int steps, int offset = 0,
           bool batch_norm = false) {
  auto adam = nn::optimizers::adam(0.05);
  for (int step = 0; step < steps; ++step) {
    std::vector<float> xs(8 * 3), ys(8);
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 3; ++j) xs[i * 3 + j] = std::sin(0.37f * (step + offset) + i + j);
      ys[i] = std::cos(0.2f * i + step + offset);
    }
    Tensor x = Tensor::from_vector(xs, Shape{8, 3}), y = Tensor::from_vector(ys, Shape{8, 1});
    strategy.run_replicas(variables, [&](ReplicaContext& ctx) {
      GradientTape tape;
      Tensor h = nn::dense("h", x, 16, nn::tanh);
      if (batch_norm) h = nn::batch_norm("bn", h, /*training=*/true, {.momentum = 0.8});
      Tensor loss = nn::mean_squared_error(y, nn::dense("out", h, 1));
      ctx.apply_gradients(*adam, tape.gradient(loss, ctx.trainable_sources()), 8);
    });
  }
}

TEST(ParameterServerStrategyTest, OneWorkerWithTwoPsTrainsAsOneDevice) {
  Cluster cluster = start_servers(2);
  auto strategy =
      ParameterServerStrategy::create(configured(cluster.json(R"({"type": "chief", "index": 0})")),
                                      {Device::cpu(0)}, small_slices());
  auto variables = strategy->create_variables(11);
  EXPECT_EQ(strategy->extended().broadcast_from_chief(0), 0);
  train(*strategy, *variables, 12);
  EXPECT_EQ(strategy->extended().global_step_after(*variables, 0), 12);

  auto one = OneDeviceStrategy::create(Device::cpu(0));
  auto reference = one->create_variables(11);
  train(*one, *reference, 12);
  EXPECT_FALSE(parameter_server_traffic(*one).has_value());
  EXPECT_GT(parameter_server_traffic(*strategy)->bytes_pushed, 0);
  std::shared_ptr<const nn::VariableStore> saved =
      strategy->extended().variables_to_save(*variables);
  for (nn::Variable* expected : reference->primary().variables()) {
    nn::Variable* got = saved->find(expected->name());
    ASSERT_NE(got, nullptr) << expected->name();
    EXPECT_EQ(got->shape(), expected->shape()) << expected->name();
    EXPECT_EQ(got->spec().slot_of, expected->spec().slot_of) << expected->name();
    std::vector<double> a = expected->tensor().to_vector<double>(),
                        b = got->tensor().to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-5) << expected->name() << "[" << i << "]";
    }
  }
  EXPECT_EQ(saved->variables().size(), reference->primary().variables().size());
}

TEST(ParameterServerStrategyTest, AWorkerWaitsForTheChiefAndBothUpdateTheSameVariables) {
  Cluster cluster = start_servers(2);
  auto chief = strategy_of(cluster, R"({"type": "chief", "index": 0})");
  auto worker = strategy_of(cluster, R"({"type": "worker", "index": 0})");
  auto worker_run = std::async(std::launch::async, [&] {
    auto variables = worker->create_variables(99);  // another seed: it takes the chief's values
    int64_t step = worker->extended().broadcast_from_chief(-1);
    train(*worker, *variables, 10, /*offset=*/100);
    return step;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto variables = chief->create_variables(11);
  chief->extended().broadcast_from_chief(5);
  train(*chief, *variables, 10);
  // The worker takes the step current when it sees the chief's: 5, or later if the chief's
  // first steps land before its wait returns; never the unset step from before the chief.
  int64_t worker_start = worker_run.get();
  EXPECT_GE(worker_start, 5);
  EXPECT_LE(worker_start, 15);
  std::shared_ptr<const nn::VariableStore> saved = chief->extended().variables_to_save(*variables);
  // 20 pushes in all: the global step and every ps task's Adam counter.
  ps::ClientOptions member;
  member.security = testing::test_security();
  ps::PsClient ps0(0, cluster.servers[0]->address(), member);
  EXPECT_EQ(ps0.global_step(std::nullopt, 5), 25);
  EXPECT_EQ(saved->find("Adam/iterations")->tensor().item<int64_t>(), 20);
}

// Batch norm's moving statistics live on the ps tasks like the weights: a chief and then a
// worker, taking turns, end where one device that ran both their steps ends, and the
// checkpoint has the statistics both moved.
TEST(ParameterServerStrategyTest, MovingStatisticsAreSharedAndEveryWorkerMovesThem) {
  Cluster cluster = start_servers(2);
  auto chief = strategy_of(cluster, R"({"type": "chief", "index": 0})");
  auto worker = strategy_of(cluster, R"({"type": "worker", "index": 0})");
  auto chief_variables = chief->create_variables(11);
  chief->extended().broadcast_from_chief(0);
  auto worker_variables = worker->create_variables(99);
  worker->extended().broadcast_from_chief(0);
  for (int turn = 0; turn < 3; ++turn) {
    train(*chief, *chief_variables, 2, 10 * turn, /*batch_norm=*/true);
    train(*worker, *worker_variables, 2, 10 * turn + 5, /*batch_norm=*/true);
  }

  auto one = OneDeviceStrategy::create(Device::cpu(0));
  auto reference = one->create_variables(11);
  for (int turn = 0; turn < 3; ++turn) {
    train(*one, *reference, 2, 10 * turn, /*batch_norm=*/true);
    train(*one, *reference, 2, 10 * turn + 5, /*batch_norm=*/true);
  }
  std::shared_ptr<const nn::VariableStore> saved =
      chief->extended().variables_to_save(*chief_variables);
  for (const char* name : {"bn/moving_mean", "bn/moving_variance", "bn/gamma", "h/kernel"}) {
    nn::Variable* got = saved->find(name);
    ASSERT_NE(got, nullptr) << name;
    std::vector<double> a = reference->primary().find(name)->tensor().to_vector<double>(),
                        b = got->tensor().to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << name << "[" << i << "]";
  }
  // The statistics moved away from their initial zeros and ones.
  EXPECT_GT(std::abs(saved->find("bn/moving_mean")->tensor().to_vector<double>()[0]), 1e-3);
}

TEST(ParameterServerStrategyTest, EmbeddingsPullAndPushOnlyTheRowsLookedUp) {
  Cluster cluster = start_servers(2);
  ParameterServerOptions options = small_slices();
  options.placement.min_slice_bytes = 1 << 20;
  auto strategy = ParameterServerStrategy::create(
      configured(cluster.json(R"({"type": "chief", "index": 0})")), {Device::cpu(0)}, options);
  auto variables = strategy->create_variables(3);
  strategy->extended().broadcast_from_chief(0);
  const int64_t vocab = 50000, dim = 16;  // 3.2 MB, two slices
  auto adagrad = nn::optimizers::adagrad(0.1);
  auto step = [&](int64_t ids_per_step, int64_t seed) {
    std::vector<int64_t> ids(static_cast<size_t>(ids_per_step));
    for (int64_t i = 0; i < ids_per_step; ++i) ids[i] = (seed * 7919 + i * 104729) % vocab;
    Tensor id_tensor = Tensor::from_vector(ids);
    auto moved = [&] {
      ParameterServerTraffic traffic = parameter_server_traffic(*strategy).value();
      return traffic.bytes_sent + traffic.bytes_received;
    };
    int64_t before = moved();
    strategy->run_replicas(*variables, [&](ReplicaContext& ctx) {
      GradientTape tape;
      Tensor e = nn::embedding("emb", id_tensor, vocab, dim);
      Tensor loss = mean(square(e - 0.5));
      ctx.apply_gradients(*adagrad, tape.gradient(loss, ctx.trainable_sources()), 1);
    });
    return moved() - before;
  };
  step(8, 0);  // creation sends the table once
  int64_t few = step(8, 1), many = step(64, 2);
  int64_t table = vocab * dim * 4;
  EXPECT_LT(few, 4 * 8 * dim * 4 + 4096) << "bytes moved for 8 rows";
  EXPECT_LT(many, 4 * 64 * dim * 4 + 4096) << "bytes moved for 64 rows";
  EXPECT_GT(many, 4 * few) << "bytes should grow with the rows looked up";
  EXPECT_LT(many * 50, table);
  // The rows looked up moved toward 0.5; a checkpoint holds the whole table.
  std::shared_ptr<const nn::VariableStore> saved =
      strategy->extended().variables_to_save(*variables);
  EXPECT_EQ(saved->find("emb/embeddings")->shape(), (Shape{vocab, dim}));
  EXPECT_EQ(saved->find("emb/embeddings/Adagrad/accumulator")->shape(), (Shape{vocab, dim}));
}

TEST(ParameterServerStrategyTest, AClusterWithoutPsTasksIsNamed) {
  ClusterConfig cluster = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}})");
  try {
    ParameterServerStrategy::create(cluster);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("needs ps tasks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cadre
