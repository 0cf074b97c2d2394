// Parameter servers on 127.0.0.1 with their clients in this process: placement, the
// service's contract (the chief creates, others wait; pulls; pushes applied by the optimizer
// on the server, atomically; every bad input named), and ParameterServerStrategy training
// as one device does.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/placement.h"
#include "strategies/ps/ps_client.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/tensor_data.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

using testing::free_port;

using ps::Placement;
using ps::PlacementOptions;

// ---------------------------------------------------------------- placement

TEST(PlacementTest, GreedyBalancesBytesAndSlicesLargeVariables) {
  PlacementOptions options;
  options.min_slice_bytes = 1000;
  Placement placement(2, options);
  EXPECT_EQ(placement.place("a", Shape{10}, DType::kFloat32)[0].ps, 0);  // 40 bytes
  EXPECT_EQ(placement.place("b", Shape{20}, DType::kFloat32)[0].ps, 1);  // 80 bytes
  EXPECT_EQ(placement.place("c", Shape{5}, DType::kFloat32)[0].ps, 0);   // 0 holds less
  // 4,000 bytes: 4 slices of 1,000 would do, but there are 2 ps tasks.
  std::vector<ps::Slice> big = placement.place("big", Shape{101, 10}, DType::kFloat32);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].name, "big/part_0");
  EXPECT_EQ(big[0].ps, 0);  // 60 bytes against 80
  EXPECT_EQ(big[0].rows, 51);
  EXPECT_EQ(big[1].ps, 1);
  EXPECT_EQ(big[1].first_row, 51);
  EXPECT_EQ(big[1].rows, 50);
  EXPECT_EQ(placement.place("step", Shape{}, DType::kInt64).size(), 1u);
  EXPECT_NE(placement.describe().find("ps:1: 3 variable(s), 2088 bytes (b, big/part_1, step)"),
            std::string::npos)
      << placement.describe();

  options.max_shards = 1;
  EXPECT_EQ(Placement(3, options).place("big", Shape{1000, 10}, DType::kFloat32).size(), 1u);
  EXPECT_THROW(Placement(0), InvalidArgumentError);
}

TEST(PlacementTest, RoundRobinTakesTurns) {
  PlacementOptions options;
  options.policy = PlacementOptions::Policy::kRoundRobin;
  Placement placement(3, options);
  std::vector<int> where;
  for (int i = 0; i < 5; ++i) {
    where.push_back(placement.place("v" + std::to_string(i), Shape{1000}, DType::kFloat32)[0].ps);
  }
  EXPECT_EQ(where, (std::vector<int>{0, 1, 2, 0, 1}));
}

// ---------------------------------------------------------------- the service

ps::CreateRequest create_request(const std::string& name, const Tensor* value, Shape shape,
                                 double timeout = 10) {
  ps::CreateRequest request;
  request.mutable_variable()->set_name(name);
  request.mutable_variable()->set_dtype(static_cast<int>(DType::kFloat32));
  for (int64_t d : shape) request.mutable_variable()->add_shape(d);
  request.mutable_variable()->set_trainable(true);
  if (value) ps::to_proto(*value, request.mutable_initial_value());
  request.set_want_value(!value);
  request.set_timeout_seconds(timeout);
  return request;
}

ps::PushRequest push_request(const nn::Optimizer& optimizer, bool from_chief, double timeout = 10) {
  ps::PushRequest request;
  ps::to_proto(optimizer.config(), request.mutable_optimizer());
  request.set_from_chief(from_chief);
  request.set_timeout_seconds(timeout);
  return request;
}

void add_dense(ps::PushRequest& request, const std::string& name, const Tensor& gradient) {
  ps::PushItem* item = request.add_items();
  item->set_name(name);
  ps::to_proto(gradient, item->mutable_dense());
}

// The chief's optimizer state for `name`: its slots (zeros, as fresh) and step counter 0.
void add_fresh_state(ps::PushRequest& request, const nn::Optimizer& optimizer,
                     const std::string& name, const Tensor& value) {
  nn::Variable stand_in(nn::VariableSpec{.name = name, .shape = value.shape()}, value);
  for (const nn::VariableSpec& slot : optimizer.slot_variable_specs(stand_in)) {
    ps::NamedTensor* t = request.add_slots();
    t->set_name(slot.name);
    t->set_slot_of(name);
    ps::to_proto(Tensor::full(value.shape(), slot.name.ends_with("accumulator") ? 0.1 : 0.0),
                 t->mutable_value());
  }
  request.add_slots_for(name);
  request.set_has_initial_iterations(true);
  request.set_initial_iterations(0);
}

Tensor read(ps::PsClient& client, const std::string& name) {
  ps::PullRequest request;
  request.add_items()->set_name(name);
  return ps::from_proto(client.pull(request).values(0), name);
}

class ParameterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ps::ServerOptions options;
    options.max_message_bytes = 1 << 20;
    server_ = ps::ParameterServer::start("127.0.0.1:0", options);
    ps::ClientOptions client;
    client.rpc_timeout_seconds = 20;
    client_ = std::make_unique<ps::PsClient>(0, server_->address(), client);
    client_->wait_until_ready(10);
  }
  std::unique_ptr<ps::ParameterServer> server_;
  std::unique_ptr<ps::PsClient> client_;
};

TEST_F(ParameterServerTest, TheChiefCreatesAndOthersWaitForItsValue) {
  Tensor value = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  auto worker = std::async(std::launch::async, [&] {
    return client_->create(create_request("w", nullptr, Shape{3, 2}));
  });
  EXPECT_EQ(worker.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  client_->create(create_request("w", &value, Shape{3, 2}));
  EXPECT_EQ(ps::from_proto(worker.get().value(), "w").to_vector<float>(), value.to_vector<float>());

  ps::PullRequest rows;
  ps::PullItem* item = rows.add_items();
  item->set_name("w");
  ps::to_proto(Tensor::from_vector<int64_t>({2, 0}), item->mutable_rows());
  EXPECT_EQ(ps::from_proto(client_->pull(rows).values(0), "w").to_vector<float>(),
            (std::vector<float>{5, 6, 1, 2}));
  // A different shape for the same name is a mistake, named with both shapes.
  try {
    client_->create(create_request("w", nullptr, Shape{2, 3}));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("exists as float32 [3, 2]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("float32 [2, 3]"), std::string::npos) << e.what();
  }
}

TEST_F(ParameterServerTest, PushesApplyTheOptimizerAsALocalOneWould) {
  Tensor initial = Tensor::from_vector<float>({1, -2, 3, 0.5}, Shape{2, 2});
  client_->create(create_request("w", &initial, Shape{2, 2}));
  client_->global_step(0, 10);
  auto adam = nn::optimizers::adam(0.1);
  nn::VariableStore local_store;
  nn::VariableStoreScope scope(local_store);
  nn::Variable& local = nn::get_variable("w", Shape{2, 2}, nn::initializers::zeros());
  local.assign(initial);
  for (int step = 1; step <= 3; ++step) {
    Tensor g = Tensor::from_vector<float>({0.3f * step, -1, 2, 0.1f}, Shape{2, 2});
    ps::PushRequest request = push_request(*adam, /*from_chief=*/true);
    if (step == 1) add_fresh_state(request, *adam, "w", initial);
    add_dense(request, "w", g);
    request.set_increment_global_step(true);
    EXPECT_EQ(client_->push(request).global_step(), step);
    adam->apply_gradients({g}, {&local});
  }
  std::vector<float> here = local.tensor().to_vector<float>(),
                     there = read(*client_, "w").to_vector<float>();
  for (size_t i = 0; i < here.size(); ++i) EXPECT_NEAR(here[i], there[i], 1e-6) << i;
  ps::ReadRequest counter;
  counter.add_names("Adam/iterations");
  EXPECT_EQ(ps::from_proto(client_->read(counter).variables(0).value(), "it").item<int64_t>(), 3);
}

TEST_F(ParameterServerTest, SparsePushesTouchOnlyTheirRows) {
  Tensor initial = Tensor::full(Shape{5, 2}, 1.0);
  client_->create(create_request("table", &initial, Shape{5, 2}));
  auto adagrad = nn::optimizers::adagrad(0.5);
  ps::PushRequest request = push_request(*adagrad, true);
  add_fresh_state(request, *adagrad, "table", initial);
  ps::PushItem* item = request.add_items();
  item->set_name("table");
  item->set_sparse(true);
  ps::to_proto(Tensor::from_vector<int64_t>({3, 1, 3}), item->mutable_indices());
  ps::to_proto(Tensor::full(Shape{3, 2}, 1.0), item->mutable_values());
  client_->push(request);
  std::vector<float> rows = read(*client_, "table").to_vector<float>();
  for (int r : {0, 2, 4}) {
    EXPECT_EQ(rows[2 * r], 1.0f) << "row " << r;
  }
  EXPECT_LT(rows[2], 1.0f);     // row 1: one gradient
  EXPECT_LT(rows[6], rows[2]);  // row 3: two gradients, summed
}

TEST_F(ParameterServerTest, AWorkersFirstPushWaitsForTheChiefsOptimizerState) {
  Tensor initial = Tensor::zeros(Shape{2});
  client_->create(create_request("b", &initial, Shape{2}));
  auto sgd = nn::optimizers::sgd(0.1, /*momentum=*/0.9);
  ps::PushRequest early = push_request(*sgd, /*from_chief=*/false, /*timeout=*/0.5);
  add_dense(early, "b", Tensor::full(Shape{2}, 1.0));
  try {
    client_->push(early);
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("has not come from the chief"), std::string::npos)
        << e.what();
  }
  ps::PushRequest chief = push_request(*sgd, true);
  add_fresh_state(chief, *sgd, "b", initial);
  client_->push(chief);  // state only
  early.set_timeout_seconds(5);
  client_->push(early);
  EXPECT_NEAR(read(*client_, "b").to_vector<float>()[0], -0.1, 1e-6);
}

TEST_F(ParameterServerTest, GradientsStalerThanTheBoundAreDropped) {
  Tensor initial = Tensor::zeros(Shape{3});
  client_->create(create_request("v", &initial, Shape{3}));
  client_->global_step(100, 10);
  auto sgd = nn::optimizers::sgd(1.0);
  ps::PushRequest state = push_request(*sgd, true);
  add_fresh_state(state, *sgd, "v", initial);
  client_->push(state);
  auto push_from = [&](int64_t pulled_step) {
    ps::PushRequest request = push_request(*sgd, false);
    add_dense(request, "v", Tensor::full(Shape{3}, -1.0));
    request.set_pulled_step(pulled_step);
    request.set_max_staleness(5);
    request.set_increment_global_step(true);
    return client_->push(request);
  };
  ps::PushResponse stale = push_from(94);  // 6 steps behind
  EXPECT_TRUE(stale.dropped());
  EXPECT_EQ(stale.global_step(), 100);
  EXPECT_EQ(read(*client_, "v").to_vector<float>(), (std::vector<float>{0, 0, 0}));
  ps::PushResponse fresh = push_from(95);  // 5 behind: within the bound
  EXPECT_FALSE(fresh.dropped());
  EXPECT_EQ(fresh.global_step(), 101);
  EXPECT_EQ(read(*client_, "v").to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST_F(ParameterServerTest, BadGradientsAndOversizedMessagesAreClearErrors) {
  Tensor initial = Tensor::zeros(Shape{2, 2});
  client_->create(create_request("w", &initial, Shape{2, 2}));
  auto sgd = nn::optimizers::sgd(0.1);
  ps::PushRequest request = push_request(*sgd, true);
  add_fresh_state(request, *sgd, "w", initial);
  add_dense(request, "w", Tensor::zeros(Shape{3, 3}));
  try {
    client_->push(request);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    std::string message = e.what();
    EXPECT_NE(
        message.find("the gradient for 'w' is float32 [3, 3]; the variable is float32 [2, 2]"),
        std::string::npos)
        << message;
  }
  // Over the client's limit: refused before it is sent.
  ps::ClientOptions small;
  small.max_message_bytes = 1000;
  ps::PsClient limited(0, server_->address(), small);
  Tensor big = Tensor::zeros(Shape{1000});
  try {
    limited.create(create_request("big", &big, Shape{1000}));
    FAIL() << "expected ResourceExhaustedError";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_NE(std::string(e.what()).find("over the message limit of 1000"), std::string::npos)
        << e.what();
  }
  // Over the server's (1 MiB): its answer would be too large.
  Tensor large = Tensor::zeros(Shape{300000});
  ps::ClientOptions roomy;
  roomy.max_message_bytes = 4 << 20;
  ps::PsClient generous(0, server_->address(), roomy);
  EXPECT_THROW(generous.create(create_request("large", &large, Shape{300000})),
               ResourceExhaustedError);
}

TEST_F(ParameterServerTest, PushesToOneVariableAreAtomic) {
  Tensor initial = Tensor::zeros(Shape{4096});
  client_->create(create_request("counter", &initial, Shape{4096}));
  auto sgd = nn::optimizers::sgd(1.0);
  ps::PushRequest state = push_request(*sgd, true);
  add_fresh_state(state, *sgd, "counter", initial);
  client_->push(state);
  std::vector<std::future<void>> threads;
  for (int t = 0; t < 6; ++t) {
    threads.push_back(std::async(std::launch::async, [&] {
      for (int i = 0; i < 40; ++i) {
        ps::PushRequest request = push_request(*sgd, false);
        add_dense(request, "counter", Tensor::full(Shape{4096}, -1.0));
        client_->push(request);
      }
    }));
  }
  for (auto& t : threads) t.get();
  for (float v : read(*client_, "counter").to_vector<float>()) ASSERT_EQ(v, 240.0f);
}

TEST(ParameterServerErrorsTest, AnAddressThatNeverAnswersAndAPortInUseAreNamed) {
  std::string nobody = "127.0.0.1:" + std::to_string(free_port());
  ps::PsClient client(1, nobody);
  try {
    client.wait_until_ready(1);
    FAIL() << "expected DeadlineExceededError";
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("ps:1 (" + nobody + ") did not answer within 1 s"),
              std::string::npos)
        << e.what();
  }
  auto first = ps::ParameterServer::start("127.0.0.1:0");
  try {
    ps::ParameterServer::start(first->address());
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(first->address()), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- the strategy

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

Cluster start_servers(int count) {
  Cluster cluster;
  for (int i = 0; i < count; ++i) {
    ps::ServerOptions options;
    options.task = "ps:" + std::to_string(i);
    cluster.servers.push_back(ps::ParameterServer::start("127.0.0.1:0", options));
  }
  return cluster;
}

ParameterServerOptions small_slices() {
  ParameterServerOptions options;
  options.placement.min_slice_bytes = 256;  // slice even this small model
  options.init_timeout_seconds = 30;
  options.connect_timeout_seconds = 10;
  return options;
}

// The strategy of `task` in `cluster` with one worker beside the chief.
std::shared_ptr<ParameterServerStrategy> strategy_of(const Cluster& cluster, const char* task) {
  return ParameterServerStrategy::create(parse_tf_config(cluster.json(task, 1)), {Device::cpu(0)},
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
  auto strategy = ParameterServerStrategy::create(
      parse_tf_config(cluster.json(R"({"type": "chief", "index": 0})")), {Device::cpu(0)},
      small_slices());
  auto variables = strategy->create_variables(11);
  EXPECT_EQ(strategy->broadcast_from_chief(0), 0);
  train(*strategy, *variables, 12);
  EXPECT_EQ(strategy->global_step_after(*variables, 0), 12);

  auto one = OneDeviceStrategy::create(Device::cpu(0));
  auto reference = one->create_variables(11);
  train(*one, *reference, 12);
  std::shared_ptr<const nn::VariableStore> saved = strategy->variables_to_save(*variables);
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
    int64_t step = worker->broadcast_from_chief(-1);
    train(*worker, *variables, 10, /*offset=*/100);
    return step;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto variables = chief->create_variables(11);
  chief->broadcast_from_chief(5);
  train(*chief, *variables, 10);
  EXPECT_EQ(worker_run.get(), 5);
  std::shared_ptr<const nn::VariableStore> saved = chief->variables_to_save(*variables);
  // 20 pushes in all: the global step and every ps task's Adam counter.
  ps::PsClient ps0(0, cluster.servers[0]->address());
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
  chief->broadcast_from_chief(0);
  auto worker_variables = worker->create_variables(99);
  worker->broadcast_from_chief(0);
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
  std::shared_ptr<const nn::VariableStore> saved = chief->variables_to_save(*chief_variables);
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
      parse_tf_config(cluster.json(R"({"type": "chief", "index": 0})")), {Device::cpu(0)}, options);
  auto variables = strategy->create_variables(3);
  strategy->broadcast_from_chief(0);
  const int64_t vocab = 50000, dim = 16;  // 3.2 MB, two slices
  auto adagrad = nn::optimizers::adagrad(0.1);
  auto step = [&](int64_t ids_per_step, int64_t seed) {
    std::vector<int64_t> ids(static_cast<size_t>(ids_per_step));
    for (int64_t i = 0; i < ids_per_step; ++i) ids[i] = (seed * 7919 + i * 104729) % vocab;
    Tensor id_tensor = Tensor::from_vector(ids);
    int64_t before = strategy->bytes_sent() + strategy->bytes_received();
    strategy->run_replicas(*variables, [&](ReplicaContext& ctx) {
      GradientTape tape;
      Tensor e = nn::embedding("emb", id_tensor, vocab, dim);
      Tensor loss = mean(square(e - 0.5));
      ctx.apply_gradients(*adagrad, tape.gradient(loss, ctx.trainable_sources()), 1);
    });
    return strategy->bytes_sent() + strategy->bytes_received() - before;
  };
  step(8, 0);  // creation sends the table once
  int64_t few = step(8, 1), many = step(64, 2);
  int64_t table = vocab * dim * 4;
  EXPECT_LT(few, 4 * 8 * dim * 4 + 4096) << "bytes moved for 8 rows";
  EXPECT_LT(many, 4 * 64 * dim * 4 + 4096) << "bytes moved for 64 rows";
  EXPECT_GT(many, 4 * few) << "bytes should grow with the rows looked up";
  EXPECT_LT(many * 50, table);
  // The rows looked up moved toward 0.5; a checkpoint holds the whole table.
  std::shared_ptr<const nn::VariableStore> saved = strategy->variables_to_save(*variables);
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
