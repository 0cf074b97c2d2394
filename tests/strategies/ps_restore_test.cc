// Restores on the ps tasks: the chief names a checkpoint and rows (ps.proto's RestoreRows), and
// each ps task reads its own rows of a row-access variable and its slots, so that the chief
// never builds the table; a task that cannot read checkpoints leaves it to the chief.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"
#include "strategies/strategy_extended.h"
#include "tests/strategies/ps_requests.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

constexpr char kCheckpoint[] = "model.ckpt-7.h5";

// The checkpoint's value of `name` at logical row r, column j: distinct per name and row.
float stored_value(const std::string& name, int64_t row, int64_t column) {
  float base = name.find("accumulator") != std::string::npos ? 0.5f : 0.0f;
  return base + static_cast<float>(row) * 0.01f + static_cast<float>(column) * 0.001f;
}

// A ps task's reads of a checkpoint: each call's rows, filled with stored_value.
class RowsRead {
 public:
  struct Call {
    std::string checkpoint, name;
    int64_t first_row, rows;
  };
  ps::RowRestorer restorer() {
    return [this](const std::string& checkpoint, const std::string& name, int64_t first_row,
                  const Tensor& destination) {
      std::vector<float> values;
      for (int64_t r = 0; r < destination.dim(0); ++r) {
        for (int64_t j = 0; j < destination.dim(1); ++j) {
          values.push_back(stored_value(name, first_row + r, j));
        }
      }
      Tensor target = destination;  // a handle: writes the caller's buffer
      target.assign(Tensor::from_vector(values, destination.shape()));
      std::lock_guard<std::mutex> hold(mutex_);
      calls_.push_back({checkpoint, name, first_row, destination.dim(0)});
    };
  }
  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> hold(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Call> calls_;
};

TEST(PsRestoreTest, AShardReadsTheRowsTheChiefNamesAndNoOthers) {
  RowsRead reads;
  ps::Shard shard("ps:1", reads.restorer());
  ps::CreateRequest create = testing::create_request("t/part_1", nullptr, Shape{3, 2});
  create.set_want_value(false);
  ps::RestoreRows* rows = create.mutable_restore();
  rows->set_checkpoint(kCheckpoint);
  rows->set_name("t");
  rows->set_first_row(4);
  shard.create(create);
  ASSERT_EQ(reads.calls().size(), 1u);
  EXPECT_EQ(reads.calls()[0].checkpoint, kCheckpoint);
  EXPECT_EQ(reads.calls()[0].name, "t");
  EXPECT_EQ(reads.calls()[0].first_row, 4);
  EXPECT_EQ(reads.calls()[0].rows, 3);
  // A worker's creation finds the rows read.
  ps::CreateResponse worker =
      shard.create(testing::create_request("t/part_1", nullptr, Shape{3, 2}));
  EXPECT_FLOAT_EQ(ps::from_proto(worker.value(), "t").to_vector<float>()[5],
                  stored_value("t", 6, 1));

  // The chief's slot, read by the shard in the variable's rows.
  auto adagrad = nn::optimizers::adagrad(0.1);
  ps::PushRequest state = testing::push_request(*adagrad, /*from_chief=*/true);
  ps::NamedTensor* slot = state.add_slots();
  slot->set_name("t/part_1/Adagrad/accumulator");
  slot->set_slot_of("t/part_1");
  slot->mutable_value()->set_dtype(static_cast<int>(DType::kFloat32));
  slot->mutable_value()->add_shape(3);
  slot->mutable_value()->add_shape(2);
  *slot->mutable_restore() = *rows;
  slot->mutable_restore()->set_name("t/Adagrad/accumulator");
  state.add_slots_for("t/part_1");
  shard.push(state);
  ASSERT_EQ(reads.calls().size(), 2u);
  EXPECT_EQ(reads.calls()[1].name, "t/Adagrad/accumulator");
  EXPECT_EQ(reads.calls()[1].first_row, 4);
  ps::ReadRequest read;
  read.add_names("t/part_1/Adagrad/accumulator");
  Tensor accumulator = ps::from_proto(shard.read(read).variables(0).value(), "accumulator");
  EXPECT_FLOAT_EQ(accumulator.to_vector<float>()[0], stored_value("t/Adagrad/accumulator", 4, 0));

  // A task that cannot read checkpoints says so, and holds nothing new.
  ps::Shard without("ps:2");
  EXPECT_THROW(without.create(create), FailedPreconditionError);
  EXPECT_EQ(without.read(ps::ReadRequest()).variables_size(), 0);
}

struct RestoreCluster {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
  std::vector<std::unique_ptr<RowsRead>> reads;
};

// `count` ps tasks on 127.0.0.1 that read checkpoints (through RowsRead) when `readers`.
RestoreCluster start_reading_servers(int count, bool readers) {
  RestoreCluster cluster;
  for (int i = 0; i < count; ++i) {
    cluster.reads.push_back(std::make_unique<RowsRead>());
    ps::ServerOptions options;
    options.task = "ps:" + std::to_string(i);
    options.security = testing::test_security();
    if (readers) options.read_rows = cluster.reads.back()->restorer();
    cluster.servers.push_back(ps::ParameterServer::start("127.0.0.1:0", options));
  }
  return cluster;
}

std::shared_ptr<ParameterServerStrategy> restoring_chief(const RestoreCluster& cluster,
                                                         bool on_ps_tasks) {
  std::string ps;
  for (const auto& s : cluster.servers) ps += (ps.empty() ? "\"" : ", \"") + s->address() + "\"";
  ClusterConfig config = parse_tf_config(R"({"cluster": {"chief": ["127.0.0.1:39998"], "ps": [)" +
                                         ps + R"(]}, "task": {"type": "chief", "index": 0}})");
  config.security = testing::test_security();
  ParameterServerOptions options;
  options.placement.min_slice_bytes = 256;  // the 32 x 4 table in slices on both tasks
  options.init_timeout_seconds = 30;
  options.connect_timeout_seconds = 10;
  options.restore_on_ps_tasks = on_ps_tasks;
  return ParameterServerStrategy::create(config, {Device::cpu(0)}, options);
}

// The chief restores a 32 x 4 embedding table and its Adagrad accumulator, takes one step
// that looks up rows 1 and 5, and returns the logical variables. `built` counts what the
// chief's creator made of the table and its slot (restoring them itself).
std::shared_ptr<const nn::VariableStore> restore_and_step(const RestoreCluster& cluster, int* built,
                                                          bool on_ps_tasks = true) {
  auto chief = restoring_chief(cluster, on_ps_tasks);
  nn::VariableCreator creator = [built](const nn::VariableSpec& spec, uint64_t seed) {
    if (!spec.name.starts_with("token/")) return nn::default_variable_creator(spec, seed);
    ++*built;
    std::vector<float> values;
    for (int64_t r = 0; r < spec.shape[0]; ++r) {
      for (int64_t j = 0; j < spec.shape[1]; ++j) values.push_back(stored_value(spec.name, r, j));
    }
    return std::make_shared<nn::Variable>(spec, Tensor::from_vector(values, spec.shape));
  };
  VariableSourceFn sources = [](const nn::VariableSpec& spec) -> std::optional<VariableSource> {
    return VariableSource{kCheckpoint, spec.name};
  };
  auto variables = chief->extended().create_restored_variables(3, creator, sources);
  chief->extended().broadcast_from_chief(7);
  auto adagrad = nn::optimizers::adagrad(0.1);
  chief->run_replicas(*variables, [&](ReplicaContext& ctx) {
    GradientTape tape;
    Tensor e = nn::embedding("token", Tensor::from_vector<int64_t>({1, 5}), 32, 4);
    ctx.apply_gradients(*adagrad, tape.gradient(sum(e), ctx.trainable_sources()), 2);
  });
  return chief->extended().variables_to_save(*variables);
}

// The rows of a row untouched by the step hold the checkpoint's values.
void expect_restored(const nn::VariableStore& saved, const std::string& name) {
  nn::Variable* variable = saved.find(name);
  ASSERT_NE(variable, nullptr) << name;
  ASSERT_EQ(variable->shape(), (Shape{32, 4})) << name;
  std::vector<float> values = variable->tensor().to_vector<float>();
  for (int64_t r : {0, 2, 17, 31}) {
    EXPECT_FLOAT_EQ(values[static_cast<size_t>(r * 4 + 3)], stored_value(name, r, 3))
        << name << " row " << r;
  }
}

TEST(PsRestoreTest, EachPsTaskReadsItsOwnRowsAndTheChiefBuildsNoTable) {
  RestoreCluster cluster = start_reading_servers(2, /*readers=*/true);
  int built = 0;
  std::shared_ptr<const nn::VariableStore> saved = restore_and_step(cluster, &built);
  EXPECT_EQ(built, 0) << "the chief built the table or its slot itself";
  expect_restored(*saved, "token/embeddings");
  expect_restored(*saved, "token/embeddings/Adagrad/accumulator");
  // Every row of both read exactly once, each task reading only some of them.
  std::map<std::string, std::multiset<int64_t>> rows_read;
  for (const auto& reads : cluster.reads) {
    std::set<int64_t> own;
    for (const RowsRead::Call& call : reads->calls()) {
      EXPECT_EQ(call.checkpoint, kCheckpoint);
      for (int64_t r = call.first_row; r < call.first_row + call.rows; ++r) {
        rows_read[call.name].insert(r);
        own.insert(r);
      }
    }
    EXPECT_GT(own.size(), 0u);
    EXPECT_LT(own.size(), 32u) << "a ps task read rows that another holds";
  }
  ASSERT_EQ(rows_read.size(), 2u);
  for (const auto& [name, rows] : rows_read) {
    EXPECT_EQ(rows.size(), 32u) << name;
    EXPECT_EQ(std::set<int64_t>(rows.begin(), rows.end()).size(), 32u) << name;
  }
}

TEST(PsRestoreTest, TheChiefRestoresWhatTasksWithoutAModelDirCannotOrWhenToldTo) {
  for (bool readers : {false, true}) {
    RestoreCluster cluster = start_reading_servers(2, readers);
    int built = 0;
    std::shared_ptr<const nn::VariableStore> saved =
        restore_and_step(cluster, &built, /*on_ps_tasks=*/!readers);
    EXPECT_EQ(built, 2) << "the table and its slot, by the chief";
    expect_restored(*saved, "token/embeddings");
    expect_restored(*saved, "token/embeddings/Adagrad/accumulator");
    for (const auto& reads : cluster.reads) EXPECT_TRUE(reads->calls().empty());
  }
}

}  // namespace
}  // namespace cadre
