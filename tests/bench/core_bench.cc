// Micro-benchmarks of the kernels a training step spends its time in.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/ops/linalg.h"
#include "cadre/ops/math.h"
#include "cadre/ops/nn.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"
#include "cadre/runtime/profiler.h"
#include "cadre/runtime/threading.h"
#include "core/base/crc32c.h"
#include "core/kernels/elementwise.h"
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

// The MLP's first kernel gradient, x^T·dz ([784, batch] x [batch, 256], one thread), built
// whole (pieces = 1) or by rows in `pieces` pieces, as gradients summed across hosts
// build it (GradientBuckets with piece_bytes).
void BM_KernelGradientPieces(benchmark::State& state) {
  set_intra_op_threads(1);
  const int64_t batch = state.range(0), pieces = state.range(1);
  Tensor x = random_normal({batch, 784}), w = random_normal({784, 256}), b = random_normal({256});
  Gradient unbuilt;
  GradientTape tape;
  tape.watch(w);
  tape.announce(sum(linear(x, w, b, Activation::kRelu)), {w},
                [&](size_t, const Gradient& g) { unbuilt = g; });
  const autodiff::DeferredGradient* kernel = unbuilt.deferred();
  for (auto _ : state) {
    if (pieces == 1) {
      benchmark::DoNotOptimize(kernel->materialize());
    } else {
      for (int64_t p = 0; p < pieces; ++p) {
        benchmark::DoNotOptimize(kernel->rows(784 * p / pieces, 784 * (p + 1) / pieces));
      }
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * batch * 784 * 256, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_KernelGradientPieces)->ArgsProduct({{256, 1024}, {1, 4}});

// CRC-32C over a buffer in cache (16 KiB; 784 KiB, the MLP's first kernel, as a checkpoint
// writer checksums it right after writing it) and one from memory (16 MiB).
void BM_Crc32c(benchmark::State& state) {
  std::vector<char> bytes(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(crc32c::value(bytes.data(), bytes.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(16 << 10)->Arg(784 << 10)->Arg(16 << 20);

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

// The first Adam update after a checkpoint save over the MLP's variables (784-256-256-10,
// 3.2 MB with the slots), on range(1) threads. mode 0: no save pending; 1: the snapshot's
// copy made first (finish_deferred_copies' path); 2: copied out by the update, chunk by chunk
// (claim_deferred_copies' path). Snapshots rotate through 8 sets of memory, so that the
// copy writes memory it last wrote 8 updates before, as a checkpoint's does.
void BM_AdamUpdateAfterASave(benchmark::State& state) {
  const int64_t mode = state.range(0);
  set_intra_op_threads(static_cast<int>(state.range(1)));
  std::vector<Tensor> vars, grads, m, v;
  for (Shape shape :
       {Shape{784, 256}, Shape{256}, Shape{256, 256}, Shape{256}, Shape{256, 10}, Shape{10}}) {
    vars.push_back(random_normal(shape));
    grads.push_back(random_normal(shape));
    m.push_back(Tensor::zeros(shape));
    v.push_back(Tensor::zeros(shape));
  }
  std::vector<std::vector<Tensor>> snapshots(8);
  for (std::vector<Tensor>& set : snapshots) {
    for (const std::vector<Tensor>* list : {&vars, &m, &v}) {
      for (const Tensor& t : *list) set.push_back(Tensor::zeros(t.shape()));
    }
  }
  std::vector<kernels::CopyOut> outs;
  size_t round = 0;
  for (auto _ : state) {
    const std::vector<Tensor>& to = snapshots[round++ % snapshots.size()];
    outs.clear();
    size_t k = 0;
    for (const std::vector<Tensor>* list : {&vars, &m, &v}) {
      for (const Tensor& t : *list) outs.push_back({t.raw_data(), to[k++].raw_data(), t.nbytes()});
    }
    if (mode == 1) {
      for (const kernels::CopyOut& out : outs) std::memcpy(out.to, out.from, out.bytes);
    }
    kernels::AdamParams p;
    if (mode == 2) p.copy_out = outs;
    kernels::adam_update.get(Device::cpu(0))(vars, grads, m, v, p);
  }
  set_intra_op_threads(1);
}
BENCHMARK(BM_AdamUpdateAfterASave)
    ->ArgNames({"mode", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->UseRealTime();

// What the profiler adds to a kernel call, on the smallest kernel (a fill of 16 floats), where
// it shows most. mode 0: the slot's function called directly, get(device)(...), as before
// profiling existed; 1: KernelSlot::call with no session (the cost of profiling when off);
// 2: call while a session records (drained every 4096 calls, as a hook would).
void BM_KernelCall(benchmark::State& state) {
  const int64_t mode = state.range(0);
  Tensor t = Tensor::zeros(Shape{16});
  std::unique_ptr<profiler::ProfilerSession> session;
  if (mode == 2) session = profiler::ProfilerSession::start();
  int64_t calls = 0;
  for (auto _ : state) {
    if (mode == 0) {
      kernels::fill.get(Device::cpu(0))(t, 1.0);
    } else {
      kernels::fill.call(Device::cpu(0), t, 1.0);
    }
    if (session && ++calls % 4096 == 0) benchmark::DoNotOptimize(session->collect());
  }
}
BENCHMARK(BM_KernelCall)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2);

// A small op end to end (checks, allocation, kernel): profiler off (0) and on (1).
void BM_SmallAddProfiled(benchmark::State& state) {
  Tensor a = random_normal({16}), b = random_normal({16});
  std::unique_ptr<profiler::ProfilerSession> session;
  if (state.range(0) == 1) session = profiler::ProfilerSession::start();
  int64_t calls = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(add(a, b));
    if (session && ++calls % 4096 == 0) benchmark::DoNotOptimize(session->collect());
  }
}
BENCHMARK(BM_SmallAddProfiled)->ArgName("on")->Arg(0)->Arg(1);

// A Scope alone: off, the one relaxed load and branch.
void BM_ProfilerScopeOff(benchmark::State& state) {
  for (auto _ : state) {
    profiler::Scope scope("bench", profiler::kUser);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ProfilerScopeOff);

// The CNN's first convolution (28x28x1 -> 26x26x32, 3x3, VALID, ReLU) and its filter
// gradient, at a batch of range(0) on range(1) threads.
void BM_Conv2DForwardBackward(benchmark::State& state) {
  set_intra_op_threads(static_cast<int>(state.range(1)));
  Tensor x = random_normal({state.range(0), 28, 28, 1}), w = random_normal({3, 3, 1, 32}),
         b = random_normal({32});
  for (auto _ : state) {
    GradientTape tape;
    tape.watch(w);
    Tensor y = sum(conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu));
    benchmark::DoNotOptimize(tape.gradient(y, w));
  }
}
BENCHMARK(BM_Conv2DForwardBackward)->ArgNames({"batch", "threads"})->Args({64, 1})->Args({256, 2});

// The CNN's first max pooling at batch 256 (26x26x32, 2x2 windows), forward only (mode 0)
// or with its gradient (mode 1), on two threads.
void BM_MaxPoolFirstLayer(benchmark::State& state) {
  set_intra_op_threads(2);
  Tensor x = random_normal({256, 26, 26, 32});
  Tensor r = random_normal({256, 13, 13, 32});
  for (auto _ : state) {
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(max_pool2d(x, {2, 2}, {2, 2}, Padding::kValid));
      continue;
    }
    GradientTape tape;
    tape.watch(x);
    Tensor y = max_pool2d(x, {2, 2}, {2, 2}, Padding::kValid);
    benchmark::DoNotOptimize(tape.gradient(y, {x}, UnconnectedGradients::kNone, r));
  }
}
BENCHMARK(BM_MaxPoolFirstLayer)->ArgName("backward")->Arg(0)->Arg(1);

// The CNN's first convolution and max pooling at batch 256 on two threads, forward: the
// pooling of a convolution's output that nothing else reads is computed with it (mode 1),
// or the output is read first, so that both ops run on their own (mode 0).
void BM_Conv2DMaxPoolFirstLayer(benchmark::State& state) {
  set_intra_op_threads(2);
  Tensor x = random_normal({256, 28, 28, 1}), w = random_normal({3, 3, 1, 32}),
         b = random_normal({32});
  for (auto _ : state) {
    Tensor y = conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu);
    if (state.range(0) == 0) benchmark::DoNotOptimize(y.raw_data());
    benchmark::DoNotOptimize(max_pool2d(y, {2, 2}, {2, 2}, Padding::kValid));
  }
}
BENCHMARK(BM_Conv2DMaxPoolFirstLayer)->ArgName("fused")->Arg(0)->Arg(1);

// The CNN's second convolution at batch 256 (13x13x32 -> 11x11x64, 3x3, VALID, ReLU):
// forward only (mode 0), or forward with the filter and input gradients (mode 1).
void BM_Conv2DSecondLayer(benchmark::State& state) {
  set_intra_op_threads(static_cast<int>(state.range(1)));
  Tensor x = random_normal({256, 13, 13, 32}), w = random_normal({3, 3, 32, 64}),
         b = random_normal({64});
  for (auto _ : state) {
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu));
      continue;
    }
    GradientTape tape;
    tape.watch(w);
    tape.watch(x);
    Tensor y = sum(conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu));
    benchmark::DoNotOptimize(tape.gradient(y, {w, x}));
  }
  const double flop = 2.0 * 256 * 11 * 11 * 64 * 3 * 3 * 32 * (state.range(0) == 0 ? 1 : 3);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flop, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Conv2DSecondLayer)
    ->ArgNames({"backward", "threads"})
    ->Args({0, 2})
    ->Args({1, 2})
    ->Args({0, 1})
    ->Args({1, 1});

}  // namespace
}  // namespace cadre
