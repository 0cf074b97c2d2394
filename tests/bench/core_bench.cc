// Micro-benchmarks of the kernels a training step spends its time in.
#include <benchmark/benchmark.h>

#include "cadre/autodiff/tape.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/runtime/threading.h"
#include "core/kernels/optimizer.h"

namespace cadre {
namespace {

// The first layer of the MLP: [batch, 784] x [784, 256] with bias and ReLU.
void BM_LinearRelu(benchmark::State& state) {
  set_intra_op_threads(static_cast<int>(state.range(1)));
  Tensor x = random_normal({state.range(0), 784}), w = random_normal({784, 256}),
         b = random_normal({256});
  for (auto _ : state) benchmark::DoNotOptimize(linear(x, w, b, Activation::kRelu));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * state.range(0) * 784 * 256,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_LinearRelu)->Args({64, 1})->Args({256, 1})->Args({256, 2});

void BM_AddBroadcast(benchmark::State& state) {
  Tensor a = random_normal({state.range(0), 256}), b = random_normal({256});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 256 * 8);
}
BENCHMARK(BM_AddBroadcast)->Arg(64)->Arg(4096);

void BM_SumRows(benchmark::State& state) {
  Tensor a = random_normal({state.range(0), 256});
  for (auto _ : state) benchmark::DoNotOptimize(sum(a, {0}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 256 * 4);
}
BENCHMARK(BM_SumRows)->Arg(256)->Arg(16384);

void BM_AdamUpdate(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<Tensor> vars{random_normal({n})}, grads{random_normal({n})},
      m{Tensor::zeros(Shape{n})}, v{Tensor::zeros(Shape{n})};
  kernels::AdamParams p;
  for (auto _ : state) kernels::adam_update.get(Device::cpu(0))(vars, grads, m, v, p);
  state.SetBytesProcessed(state.iterations() * n * 4 * 5);
}
BENCHMARK(BM_AdamUpdate)->Arg(200000)->Arg(2000000);

void BM_Conv2DForwardBackward(benchmark::State& state) {
  Tensor x = random_normal({64, 28, 28, 1}), w = random_normal({3, 3, 1, 32}), b = random_normal({32});
  for (auto _ : state) {
    GradientTape tape;
    tape.watch(w);
    Tensor y = sum(conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu));
    benchmark::DoNotOptimize(tape.gradient(y, w));
  }
}
BENCHMARK(BM_Conv2DForwardBackward);

}  // namespace
}  // namespace cadre
