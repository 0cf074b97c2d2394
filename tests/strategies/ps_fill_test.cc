// Fresh starts on the ps tasks: the chief describes a built-in initializer (ps.proto's
// InitialFill) and each ps task fills its own slices, bit for bit what one device initialises,
// however many tasks and slices there are; other initializers still go through the chief.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/strategies/one_device_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "core/nn/initial_fill.h"
#include "strategies/ps/fill_proto.h"
#include "strategies/ps/ps_server.h"
#include "strategies/ps/shard.h"
#include "strategies/strategy_extended.h"
#include "tests/strategies/ps_requests.h"
#include "tests/strategies/ps_servers.h"
#include "tests/support/job_secret.h"

namespace cadre {
namespace {

constexpr uint64_t kFillSeed = 23;

nn::VariableSpec fill_spec(const std::string& name, Shape shape, nn::Initializer initializer,
                           DType dtype = DType::kFloat32, bool row_access = true) {
  nn::VariableSpec spec;
  spec.name = name;
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  spec.initializer = std::move(initializer);
  spec.row_access = row_access;
  return spec;
}

// The built-in cases: every distribution, both float dtypes, rows whose slices start at
// elements that are not multiples of 4 (rows of 3, 5 and 7 elements).
std::vector<nn::VariableSpec> built_in_specs() {
  return {
      fill_spec("glorot/table", Shape{371, 3}, nn::initializers::glorot_uniform()),
      fill_spec("he/table", Shape{293, 5}, nn::initializers::he_normal()),
      fill_spec("normal/table", Shape{451, 7}, nn::initializers::random_normal(0.5, 2)),
      fill_spec("zeros/table", Shape{333, 3}, nn::initializers::zeros()),
      fill_spec("glorot/kernel64", Shape{191, 3}, nn::initializers::glorot_uniform(),
                DType::kFloat64, /*row_access=*/false),
      fill_spec("normal/kernel64", Shape{211, 5}, nn::initializers::truncated_normal(0, 1),
                DType::kFloat64, /*row_access=*/false),
  };
}

void expect_same_bits(const Tensor& expected, const Tensor& got, const std::string& what) {
  ASSERT_EQ(got.dtype(), expected.dtype()) << what;
  ASSERT_EQ(got.shape(), expected.shape()) << what;
  Tensor a = expected.contiguous(), b = got.contiguous();
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pb = static_cast<const unsigned char*>(b.raw_data());
  const size_t size = dtype_size(a.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_EQ(std::memcmp(pa + i * size, pb + i * size, size), 0)
        << what << ": element " << i << " of " << a.numel();
  }
}

TEST(PsFillTest, AnyRunOfElementsIsTheWholeValuesRun) {
  for (const nn::VariableSpec& spec : built_in_specs()) {
    Tensor whole = nn::default_variable_creator(spec, kFillSeed)->tensor();
    std::optional<nn::InitialFill> fill = nn::initial_fill(spec, kFillSeed);
    ASSERT_TRUE(fill.has_value()) << spec.name;
    Tensor flat = whole.reshape({-1});
    for (int64_t first : {0, 1, 2, 3, 5, 6, 7, 9, 14}) {
      for (int64_t n : {1, 2, 3, 4, 5, 11, 40}) {
        Tensor run = Tensor::empty(Shape{n}, spec.dtype, Device::cpu(0));
        // 8-byte runs: constants cross several of them.
        nn::fill_elements(*fill, first, run, /*chunk_bytes=*/8);
        expect_same_bits(flat.slice(0, first, first + n), run,
                         spec.name + " from " + std::to_string(first));
      }
    }
  }
}

TEST(PsFillTest, AShardFillsASliceFromAnyRowAndRefusesMalformedFills) {
  nn::VariableSpec spec = fill_spec("he/table", Shape{293, 5}, nn::initializers::he_normal());
  Tensor whole = nn::default_variable_creator(spec, kFillSeed)->tensor();
  nn::InitialFill fill = *nn::initial_fill(spec, kFillSeed);
  ps::Shard shard("ps:0");
  for (int64_t first_row : {0, 1, 3, 13, 291}) {
    const int64_t rows = 2;
    std::string name = "he/table/part_" + std::to_string(first_row);
    ps::CreateRequest request = testing::create_request(name, nullptr, Shape{rows, 5});
    ps::to_proto(fill, first_row * 5, request.mutable_fill());
    ps::CreateResponse response = shard.create(request);
    expect_same_bits(whole.slice(0, first_row, first_row + rows),
                     ps::from_proto(response.value(), name), name);
  }
  ps::CreateRequest unknown = testing::create_request("bad/kind", nullptr, Shape{2, 5});
  ps::to_proto(fill, 0, unknown.mutable_fill());
  unknown.mutable_fill()->set_kind(9);
  EXPECT_THROW(shard.create(unknown), InvalidArgumentError);
  ps::CreateRequest integers = testing::create_request("bad/dtype", nullptr, Shape{2, 5});
  integers.mutable_variable()->set_dtype(static_cast<int>(DType::kInt32));
  ps::to_proto(fill, 0, integers.mutable_fill());
  EXPECT_THROW(shard.create(integers), InvalidArgumentError);
  ps::CreateRequest negative = testing::create_request("bad/first", nullptr, Shape{2, 5});
  ps::to_proto(fill, -5, negative.mutable_fill());
  EXPECT_THROW(shard.create(negative), InvalidArgumentError);
}

struct FillCluster {
  std::vector<std::unique_ptr<ps::ParameterServer>> servers;
};

FillCluster start_fill_servers(int count) { return {testing::start_ps_servers(count)}; }

// The chief of `cluster`, cutting even these small variables into a slice per ps task.
std::shared_ptr<ParameterServerStrategy> fill_chief(const FillCluster& cluster) {
  std::string ps;
  for (const auto& s : cluster.servers) ps += (ps.empty() ? "\"" : ", \"") + s->address() + "\"";
  ClusterConfig config = parse_tf_config(R"({"cluster": {"chief": ["127.0.0.1:39997"], "ps": [)" +
                                         ps + R"(]}, "task": {"type": "chief", "index": 0}})");
  config.security = testing::test_security();
  ParameterServerOptions options;
  options.placement.min_slice_bytes = 16;
  options.init_timeout_seconds = 30;
  options.connect_timeout_seconds = 10;
  return ParameterServerStrategy::create(config, {Device::cpu(0)}, options);
}

TEST(PsFillTest, PsTasksFillWhatOneDeviceInitialisesBitForBitAndOtherInitializersStillWork) {
  std::atomic<int> own_calls{0};
  nn::Initializer own = [&own_calls](const Shape& shape, DType dtype, Generator& generator) {
    ++own_calls;
    return random_uniform(shape, 1, 2, dtype, &generator);
  };
  std::vector<nn::VariableSpec> specs = built_in_specs();
  int64_t built_in_bytes = 0;
  for (const nn::VariableSpec& spec : specs) {
    built_in_bytes += spec.shape.num_elements() * static_cast<int64_t>(dtype_size(spec.dtype));
  }
  specs.push_back(fill_spec("own/table", Shape{31, 3}, own));

  auto one = OneDeviceStrategy::create(Device::cpu(0));
  auto reference = one->create_variables(kFillSeed);
  for (const nn::VariableSpec& spec : specs) reference->primary().get_or_create(spec);

  for (int num_ps : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(num_ps) + " ps task(s)");
    own_calls = 0;
    FillCluster cluster = start_fill_servers(num_ps);
    auto chief = fill_chief(cluster);
    auto variables = chief->extended().create_variables(kFillSeed, nn::default_variable_creator);
    for (const nn::VariableSpec& spec : specs) variables->primary().get_or_create(spec);
    EXPECT_EQ(own_calls.load(), 1) << "the chief runs a user's initializer, once";
    EXPECT_LT(parameter_server_traffic(*chief)->bytes_sent, built_in_bytes / 4)
        << "the chief sent the built-in initializers' values";
    std::shared_ptr<const nn::VariableStore> saved =
        chief->extended().variables_to_save(*variables);  // read back from the ps tasks
    for (const nn::VariableSpec& spec : specs) {
      nn::Variable* got = saved->find(spec.name);
      ASSERT_NE(got, nullptr) << spec.name;
      expect_same_bits(reference->primary().find(spec.name)->tensor(), got->tensor(), spec.name);
    }
    // A dense variable's local copy is what the ps tasks filled.
    expect_same_bits(reference->primary().find("glorot/kernel64")->tensor(),
                     variables->primary().find("glorot/kernel64")->tensor(), "local copy");
  }
}

TEST(PsFillTest, PsTasksFillAnEmbeddingsSlotsAsOneDeviceDoes) {
  for (int num_ps : {2, 3}) {
    SCOPED_TRACE(std::to_string(num_ps) + " ps tasks");
    FillCluster cluster = start_fill_servers(num_ps);
    auto chief = fill_chief(cluster);
    auto variables = chief->create_variables(kFillSeed);
    chief->extended().broadcast_from_chief(0);
    auto adagrad = nn::optimizers::adagrad(0.1, /*initial_accumulator=*/0.25);
    chief->run_replicas(*variables, [&](ReplicaContext& ctx) {
      GradientTape tape;
      Tensor e = nn::embedding("token", Tensor::from_vector<int64_t>({1, 5}), 3701, 3);
      ctx.apply_gradients(*adagrad, tape.gradient(sum(e), ctx.trainable_sources()), 2);
    });
    std::shared_ptr<const nn::VariableStore> saved =
        chief->extended().variables_to_save(*variables);
    nn::Variable* accumulator = saved->find("token/embeddings/Adagrad/accumulator");
    ASSERT_NE(accumulator, nullptr);
    EXPECT_LT(parameter_server_traffic(*chief)->bytes_pushed, 3701 * 3 * 4 / 4)
        << "the chief sent the accumulator's values";
    std::vector<float> values = accumulator->tensor().to_vector<float>();
    ASSERT_EQ(values.size(), 3701u * 3u);
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i / 3);
      if (row == 1 || row == 5) {
        EXPECT_FLOAT_EQ(values[i], 1.25f) << "looked-up row " << row;  // 0.25 + 1^2
      } else {
        EXPECT_EQ(values[i], 0.25f) << "row " << row;
      }
    }
  }
}

}  // namespace
}  // namespace cadre
