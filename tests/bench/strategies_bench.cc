// Micro-benchmarks of the strategies' gradient reduction: 200 gradients of 2,500 floats
// (a model of many small layers) all-reduced across 2 replicas inside run(), packed into
// buckets (fused) or one reduction per tensor (unfused).
#include <benchmark/benchmark.h>

#include "cadre/ops/random.h"
#include "cadre/strategies/mirrored_strategy.h"

namespace cadre {
namespace {

void BM_AllReduce200x2500(benchmark::State& state) {
  size_t bucket_bytes = static_cast<size_t>(state.range(0));
  auto strategy = MirroredStrategy::create({Device::cpu(0), Device::cpu(1)},
                                           hierarchical_copy_all_reduce(bucket_bytes));
  auto variables = strategy->create_variables(1);
  PerReplica<std::vector<Gradient>> grads(2);
  for (int r = 0; r < 2; ++r) {
    DeviceScope device(Device::cpu(r));
    for (int i = 0; i < 200; ++i) grads[r].push_back(random_normal({2500}));
  }
  for (auto _ : state) {
    strategy->run_replicas(*variables, [&](ReplicaContext& ctx) {
      benchmark::DoNotOptimize(ctx.all_reduce(ReduceOp::kMean, grads[ctx.replica_id()]));
    });
  }
  state.SetLabel(bucket_bytes == 0 ? "unfused" : "fused");
  state.counters["gradients/s"] =
      benchmark::Counter(200, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AllReduce200x2500)->Arg(0)->Arg(kDefaultBucketBytes)->UseRealTime();

}  // namespace
}  // namespace cadre
