// Variables several times the ps message limit: pushes cut into parts that mean what the
// whole would, and a ParameterServerStrategy whose ps tasks take 64 KiB messages training
// (creation, pulls, pushes, a checkpoint's gather) to the same values as with the default
// limit.
#include <gtest/gtest.h>

#include <cmath>

#include "cadre/autodiff/tape.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/push_parts.h"
#include "strategies/strategy_extended.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

constexpr int64_t kLimit = 64 << 10;

ps::NamedTensor named(const std::string& name, int64_t floats) {
  ps::NamedTensor t;
  t.set_name(name);
  ps::to_proto(Tensor::zeros(Shape{floats}), t.mutable_value());
  return t;
}

TEST(PsPushPartsTest, SplitPartsFitTheBudgetAndTheStateAndTheOnceFieldsComeFirst) {
  auto adam = nn::optimizers::adam(0.1);
  ps::PushRequest request = testing::push_request(*adam, /*from_chief=*/true);
  request.set_pulled_step(7);
  request.set_increment_global_step(true);
  request.set_max_staleness(3);
  request.set_unit(5);
  request.set_unit_steps(2);
  request.set_unit_generation(1);
  for (int i = 0; i < 3; ++i) *request.add_slots() = named("w" + std::to_string(i) + "/m", 750);
  request.add_slots_for("w0");
  request.set_has_initial_iterations(true);
  request.set_initial_iterations(4);
  for (int i = 0; i < 5; ++i)
    testing::add_dense(request, "w" + std::to_string(i), Tensor::zeros(Shape{750}));
  *request.add_deltas() = named("bn", 750);
  EXPECT_EQ(ps::split_push(request, 1 << 20).size(), 1u);  // it fits: as it is

  const int64_t budget = 8000;  // two tensors of 3,000 bytes a part
  std::vector<ps::PushRequest> parts = ps::split_push(request, budget);
  ASSERT_GE(parts.size(), 5u);
  std::vector<std::string> order;
  size_t last_state = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const ps::PushRequest& part = parts[k];
    EXPECT_LE(static_cast<int64_t>(part.ByteSizeLong()), budget) << "part " << k;
    EXPECT_EQ(part.optimizer().kind(), request.optimizer().kind());
    EXPECT_EQ(part.pulled_step(), 7);
    EXPECT_TRUE(part.from_chief());
    EXPECT_EQ(part.increment_global_step(), k == 0);
    EXPECT_EQ(part.unit(), k == 0 ? 5 : 0);
    EXPECT_EQ(part.max_staleness(), k == 0 ? 3 : 0);
    for (const auto& t : part.slots()) order.push_back(t.name());
    for (const auto& t : part.items()) order.push_back(t.name());
    for (const auto& t : part.deltas()) order.push_back(t.name());
    if (part.slots_size() > 0) {
      EXPECT_EQ(part.items_size(), 0) << "state and gradients share part " << k;
      last_state = k;
    }
  }
  // The variables' state is complete in the part that says so.
  EXPECT_EQ(parts[last_state].slots_for_size(), 1);
  EXPECT_TRUE(parts[last_state].has_initial_iterations());
  EXPECT_EQ(parts[last_state].initial_iterations(), 4);
  EXPECT_EQ(order,
            (std::vector<std::string>{"w0/m", "w1/m", "w2/m", "w0", "w1", "w2", "w3", "w4", "bn"}));
}

std::vector<std::unique_ptr<ps::ParameterServer>> start_servers(int count, int64_t limit) {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  for (int i = 0; i < count; ++i) {
    ps::ServerOptions options;
    options.task = "ps:" + std::to_string(i);
    options.max_message_bytes = limit;
    options.security = testing::test_security();
    servers.push_back(ps::ParameterServer::start("127.0.0.1:0", options));
  }
  return servers;
}

// A push split into parts on two ps tasks counts one optimizer step on each and one global
// step; a stale one, judged by ps 0's first part, changes nothing anywhere.
TEST(PsPushPartsTest, APushInPartsCountsOneStepAndAStaleOneChangesNothing) {
  auto servers = start_servers(2, kLimit);
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  ps::ClientOptions options;
  options.max_message_bytes = kLimit;
  options.security = testing::test_security();
  for (int p = 0; p < 2; ++p) {
    clients.push_back(std::make_unique<ps::PsClient>(p, servers[p]->address(), options));
  }
  auto sgd = nn::optimizers::sgd(1.0);
  const Tensor zeros = Tensor::zeros(Shape{8192});  // 32 KiB: a part each
  std::vector<std::vector<std::string>> names = {{"a0", "a1", "a2"}, {"b0", "b1"}};
  for (int p = 0; p < 2; ++p) {
    for (const std::string& name : names[p]) {
      clients[p]->create(testing::create_request(name, &zeros, zeros.shape()));
    }
  }
  clients[0]->global_step(10, 5);
  auto push = [&](bool chief, int64_t pulled_step) {
    std::vector<ps::PushRequest> requests;
    for (int p = 0; p < 2; ++p) {
      requests.push_back(testing::push_request(*sgd, chief));
      requests[p].set_pulled_step(pulled_step);
      requests[p].set_max_staleness(2);
      for (const std::string& name : names[p]) {
        if (chief) testing::add_fresh_state(requests[p], *sgd, name, zeros);
        testing::add_dense(requests[p], name, Tensor::full(Shape{8192}, -1.0));
      }
    }
    requests[0].set_increment_global_step(true);
    return ps::send_push(clients, std::move(requests), {0, 1}, kLimit / 2,
                         /*first_decides=*/true);
  };
  ps::PushResponse fresh = push(/*chief=*/true, 10);
  EXPECT_FALSE(fresh.dropped());
  EXPECT_EQ(fresh.global_step(), 11);
  ps::PushResponse stale = push(/*chief=*/false, 7);
  EXPECT_TRUE(stale.dropped());
  for (int p = 0; p < 2; ++p) {
    for (const std::string& name : names[p]) {
      Tensor value = ps::from_proto(clients[p]->pull(testing::pull_request(name)).values(0), name);
      EXPECT_EQ(value.to_vector<float>()[8191], 1.0f) << name;
    }
    ps::ReadRequest read;
    read.add_names(sgd->name() + "/iterations");
    Tensor iterations = ps::from_proto(clients[p]->read(read).variables(0).value(), "iterations");
    EXPECT_EQ(iterations.item<int64_t>(), 1) << "ps:" << p;
  }
  EXPECT_EQ(clients[0]->global_step(std::nullopt, 5), 11);
}

// ---------------------------------------------------------------- the strategy

struct LimitedCluster {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  int64_t limit;

  std::shared_ptr<ParameterServerStrategy> strategy(const std::string& type) const {
    std::string ps;
    for (const auto& s : servers) ps += (ps.empty() ? "\"" : ", \"") + s->address() + "\"";
    ClusterConfig config = parse_tf_config(
        R"({"cluster": {"chief": ["127.0.0.1:39999"], "worker": ["127.0.0.1:40000"], "ps": [)" +
        ps + R"(]}, "task": {"type": ")" + type + R"(", "index": 0}})");
    config.security = testing::test_security();
    ParameterServerOptions options;
    options.max_message_bytes = limit;
    options.init_timeout_seconds = 30;
    options.connect_timeout_seconds = 10;
    return ParameterServerStrategy::create(config, {Device::cpu(0)}, options);
  }
};

LimitedCluster start_cluster(int64_t limit) {
  return LimitedCluster{start_servers(2, limit), limit};
}

constexpr int64_t kVocab = 4096, kDim = 16, kHidden = 1024;  // 256 KiB each

// A model whose dense kernel [64, 1024] and embedding table [4096, 16] are four times
// kLimit.
Tensor loss_of(int step) {
  std::vector<float> xs(8 * 64), ys(8);
  // A row in each of the table's sixteen 16 KiB slices: Adam's dense update of sparse
  // gradients decays the moments of the slices a push reaches, so that only a push that
  // reaches every slice updates as the whole table's would.
  std::vector<int64_t> ids(16);
  for (int i = 0; i < 16; ++i) ids[i] = i * 256 + (step * 37 + i) % 256;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 64; ++j) xs[i * 64 + j] = std::sin(0.37f * step + 0.1f * i + j);
    ys[i] = std::cos(0.2f * i + step);
  }
  Tensor x = Tensor::from_vector(xs, Shape{8, 64}), y = Tensor::from_vector(ys, Shape{8, 1});
  Tensor h = nn::dense("h", x, kHidden, nn::tanh);
  Tensor e = nn::embedding("emb", Tensor::from_vector(ids), kVocab, kDim);
  return nn::mean_squared_error(y, nn::dense("out", h, 1)) + mean(square(e - 0.5));
}

void train_steps(const Strategy& strategy, DistributedVariables& variables, int steps, int offset) {
  auto adam = nn::optimizers::adam(0.01);
  for (int step = offset; step < offset + steps; ++step) {
    strategy.run_replicas(variables, [&](ReplicaContext& ctx) {
      GradientTape tape;
      Tensor loss = loss_of(step);
      ctx.apply_gradients(*adam, tape.gradient(loss, ctx.trainable_sources()), 8);
    });
  }
}

// The chief trains, then a worker that takes the chief's values; the checkpoint's view.
std::shared_ptr<const nn::VariableStore> train_and_gather(const LimitedCluster& cluster,
                                                          Tensor* worker_pulled) {
  auto chief = cluster.strategy("chief");
  auto variables = chief->create_variables(11);
  chief->extended().broadcast_from_chief(0);
  train_steps(*chief, *variables, 3, 0);
  auto worker = cluster.strategy("worker");
  auto worker_variables = worker->create_variables(99);
  worker->extended().broadcast_from_chief(-1);
  train_steps(*worker, *worker_variables, 2, 3);
  // One more step's pull brings the worker every update.
  worker->run_replicas(*worker_variables, [&](ReplicaContext&) { loss_of(0); });
  *worker_pulled = worker_variables->primary().find("h/kernel")->tensor().clone();
  return chief->extended().variables_to_save(*variables);
}

void expect_near(const Tensor& expected, const Tensor& got, const std::string& name) {
  ASSERT_EQ(got.shape(), expected.shape()) << name;
  std::vector<double> a = expected.to_vector<double>(), b = got.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << name << "[" << i << "]";
}

TEST(PsMessageLimitTest, VariablesFourTimesTheLimitTrainAsWithTheDefaultLimit) {
  LimitedCluster small = start_cluster(kLimit),
                 roomy = start_cluster(ParameterServerOptions().max_message_bytes);
  Tensor small_pulled, roomy_pulled;
  std::shared_ptr<const nn::VariableStore> got = train_and_gather(small, &small_pulled);
  std::shared_ptr<const nn::VariableStore> expected = train_and_gather(roomy, &roomy_pulled);
  EXPECT_EQ(got->find("h/kernel")->shape(), (Shape{64, kHidden}));
  EXPECT_EQ(got->find("emb/embeddings")->shape(), (Shape{kVocab, kDim}));
  EXPECT_EQ(got->find("Adam/iterations")->tensor().item<int64_t>(), 5);
  ASSERT_EQ(got->variables().size(), expected->variables().size());
  for (nn::Variable* e : expected->variables()) {
    nn::Variable* g = got->find(e->name());
    ASSERT_NE(g, nullptr) << e->name();
    EXPECT_EQ(g->spec().slot_of, e->spec().slot_of) << e->name();
    expect_near(e->tensor(), g->tensor(), e->name());
  }
  expect_near(got->find("h/kernel")->tensor(), small_pulled, "the worker's h/kernel");
  expect_near(roomy_pulled, small_pulled, "h/kernel as pulled");
}

}  // namespace
}  // namespace cadre
