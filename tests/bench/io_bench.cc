// What batching costs per batch when a shuffle has scattered the rows: 256 rows of 784
// bytes (a Fashion-MNIST image) gathered from a 47 MB source in a random order, as `batch`
// gathers the views that `shuffle` hands it.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cadre/io/dataset.h"
#include "cadre/io/mnist.h"
#include "cadre/io/tfrecord.h"
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

// The Fashion-MNIST input_fn's pipeline without prefetch: 60,000 in-memory 784-byte images,
// shuffle(10,000), repeat, batch, scale to float.
io::Dataset shuffled_batches(int64_t batch) {
  const int64_t n = 60'000;
  Tensor images = Tensor::full(Shape{n, 784}, 7, DType::kUInt8, Device::cpu(0));
  Tensor labels = Tensor::full(Shape{n}, 3, DType::kUInt8, Device::cpu(0));
  io::Features features;
  features.set("image", images);
  return io::Dataset::from_tensor_slices(features, labels)
      .shuffle(10'000, 42)
      .repeat()
      .batch(batch, /*drop_remainder=*/true)
      .map(io::scale_pixels_fn());
}

// That pipeline on the consumer's thread.
void BM_ShuffleBatchScale(benchmark::State& state) {
  io::Iterator it = shuffled_batches(state.range(0)).make_iterator();
  for (int i = 0; i < 100; ++i) it.next();  // fills the shuffle buffer
  for (auto _ : state) benchmark::DoNotOptimize(it.next());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ShuffleBatchScale)->Arg(128)->Arg(256);

// What a checkpoint of that pipeline's position costs the training thread: the state of a
// full 10,000-row shuffle buffer (the generator's first state and the rows drawn since)
// behind an autotuned prefetch (which reads on the consumer's thread when the intra-op
// budget takes every core). The argument: MiB written between two saves to push the
// pipeline out of the caches, as the steps between two saves do (0: saves back to back).
void BM_SaveShuffledPosition(benchmark::State& state) {
  io::Iterator it = shuffled_batches(256).prefetch(io::kAutotune).make_iterator();
  for (int i = 0; i < 100; ++i) it.next();
  std::vector<char> evict(state.range(0) << 20);
  for (auto _ : state) {
    if (!evict.empty()) {
      state.PauseTiming();
      for (size_t i = 0; i < evict.size(); i += 64) evict[i] = static_cast<char>(i);
      benchmark::ClobberMemory();
      state.ResumeTiming();
    }
    it.prepare_save();
    benchmark::DoNotOptimize(it.save());
  }
}
BENCHMARK(BM_SaveShuffledPosition)->Arg(0)->Arg(64)->Unit(benchmark::kMicrosecond);

// What resuming from that position costs: a fresh iterator restored from it, whose shuffle
// draws again the rows drawn since its pass began. The argument: batches of 256 taken
// before the save (234 make a pass of 60,000 rows).
void BM_RestoreShuffledPosition(benchmark::State& state) {
  io::Dataset batches = shuffled_batches(256);
  io::Iterator it = batches.make_iterator();
  for (int64_t i = 0; i < state.range(0); ++i) it.next();
  io::IteratorState saved = it.save();
  for (auto _ : state) {
    io::Iterator resumed = batches.make_iterator();
    resumed.restore(saved);
    benchmark::DoNotOptimize(resumed);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * 256);
}
BENCHMARK(BM_RestoreShuffledPosition)->Arg(1)->Arg(230)->Unit(benchmark::kMicrosecond);

// Reading a TFRecord file back, every record's two checksums checked: 64 MiB of records of
// the argument's bytes (3,136: a 28 x 28 float image; 150,528: 224 x 224 x 3 bytes), from
// the page cache.
void BM_ReadTFRecord(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::string path = "/tmp/cadre_io_bench_" + std::to_string(::getpid()) + "_" +
                     std::to_string(bytes) + ".tfrecord";
  const int records = static_cast<int>((size_t{64} << 20) / bytes);
  {
    io::TFRecordWriter writer(path);
    std::string record(bytes, '\0');
    for (int i = 0; i < records; ++i) {
      record[static_cast<size_t>(i) % bytes] = static_cast<char>(i);
      writer.write(record);
    }
    writer.close();
  }
  for (auto _ : state) {
    io::TFRecordReader reader(path);
    size_t total = 0;
    while (std::optional<std::string> record = reader.read()) total += record->size();
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * records * static_cast<int64_t>(bytes));
  std::remove(path.c_str());
}
BENCHMARK(BM_ReadTFRecord)->Arg(3136)->Arg(150528)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cadre
