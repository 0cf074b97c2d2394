// What batching costs per batch when a shuffle has scattered the rows: 256 rows of 784
// bytes (a Fashion-MNIST image) gathered from a 47 MB source in a random order, as `batch`
// gathers the views that `shuffle` hands it.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

#include "cadre/tensor/tensor.h"
#include "io/tensor_rows.h"

namespace cadre {
namespace {

void BM_StackShuffledRows(benchmark::State& state) {
  const int64_t n = 60'000, batch = state.range(0);
  Tensor source =
      Tensor::full(Shape{n, 784}, 7, DType::kUInt8, Device::cpu(0));  // written: no zero page
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  std::vector<Tensor> views;
  for (int64_t i : order) views.push_back(io::row_view(source, i));
  std::vector<const Tensor*> rows(batch);
  size_t next = 0;
  for (auto _ : state) {
    for (const Tensor*& r : rows) {
      r = &views[next];
      next = (next + 1) % views.size();
    }
    benchmark::DoNotOptimize(io::stack_rows(rows, "image"));
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_StackShuffledRows)->Arg(128)->Arg(256);

}  // namespace
}  // namespace cadre
