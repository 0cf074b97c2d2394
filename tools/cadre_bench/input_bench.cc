#include "tools/cadre_bench/input_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/io/mnist.h"
#include "cadre/nn/nn.h"
#include "cadre/runtime/threading.h"
#include "examples/fashion_mnist/models.h"
#include "tools/cadre_bench/timing.h"

DECLARE_int32(batch_size);
DECLARE_int32(threads);
DECLARE_int32(windows);
DECLARE_double(window_s);
DECLARE_string(data_dir);
DEFINE_bool(input_experiments, true,
            "input: also run the parallel-map and prefetch-overlap experiments");

namespace cadre::bench {
namespace {

// Median over --windows windows of about --window_s seconds of `rate(batches)`, where
// one_batch() pulls one batch and returns its number of elements.
double median_rate(const std::function<int64_t()>& one_batch, const char* what) {
  std::vector<double> rates;
  for (int w = 0; w < FLAGS_windows; ++w) {
    int64_t elements = 0;
    auto start = Clock::now();
    while (seconds_since(start) < FLAGS_window_s) elements += one_batch();
    rates.push_back(static_cast<double>(elements) / seconds_since(start));
    LOG(INFO) << what << " window " << w + 1 << ": " << static_cast<int64_t>(rates.back())
              << " elements/s";
  }
  return median(rates);
}

int64_t pull(Iterator& it) {
  auto batch = it.next();
  if (!batch) throw InternalError("the benchmark pipeline ended");
  return batch->labels.numel();
}

// `work` dependent arithmetic steps spread over the pixels (the first work % n pixels take
// one more), which the compiler cannot skip.
Element burn(Element e, int64_t work) {
  Tensor image = e.features.at("image");
  Tensor out = Tensor::empty(image.shape(), DType::kFloat32, Device::cpu(0));
  const float* src = image.data<float>();
  float* dst = out.data<float>();
  int64_t n = image.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = src[i];
    int64_t rounds = work / n + (i < work % n ? 1 : 0);
    for (int64_t r = 0; r < rounds; ++r) v = v * 0.999f + std::sqrt(v + 1.0f) * 1e-3f;
    dst[i] = v;
  }
  e.features.set("image", out);
  return e;
}

// The work for burn() that makes one call on `example` last about `seconds`: doubled until
// a call is measurable, then corrected on the median of a few calls.
int64_t calibrate_burn(const Element& example, double seconds) {
  auto time_of = [&](int64_t work) {
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
      auto start = Clock::now();
      burn(example, work);
      times.push_back(seconds_since(start));
    }
    return median(times);
  };
  int64_t work = 1024;
  while (time_of(work) < 2e-3 && work < (int64_t{1} << 40)) work *= 2;
  for (int i = 0; i < 3; ++i) {
    work = std::max<int64_t>(1, static_cast<int64_t>(work * seconds / time_of(work)));
  }
  return work;
}

// One Adam step of the MLP on a batch.
class MlpTrainer {
 public:
  MlpTrainer() : store_(0), optimizer_(nn::optimizers::adam(1e-3)) {}
  void step(const Element& batch) {
    nn::VariableStoreScope scope(store_);
    GradientTape tape;
    Tensor logits = examples::mlp_logits(batch.features.at("image"));
    Tensor loss = nn::sparse_softmax_cross_entropy(batch.labels, logits);
    optimizer_->minimize(tape, loss);
    loss.item<float>();  // wait for the step
  }

 private:
  nn::VariableStore store_;
  std::shared_ptr<nn::Optimizer> optimizer_;
};

// Mean seconds per step of `steps` training steps fed by `it` (after 3 warm-up steps).
double train_step_seconds(Iterator& it, MlpTrainer& trainer, int steps) {
  for (int i = 0; i < 3; ++i) trainer.step(*it.next());
  auto start = Clock::now();
  for (int i = 0; i < steps; ++i) trainer.step(*it.next());
  return seconds_since(start) / steps;
}

// A CPU-heavy map (about 200 us per element) with 1 and 2 parallel calls: elements per
// second of each.
std::pair<double, double> heavy_map_rates(const Dataset& scaled) {
  Element example = *scaled.make_iterator().next();
  int64_t heavy_work = calibrate_burn(example, 200e-6);
  auto heavy = [&](int parallel) {
    Iterator it =
        scaled.repeat()
            .map([heavy_work](Element e) { return burn(std::move(e), heavy_work); }, parallel)
            .batch(32)
            .make_iterator();
    pull(it);
    return median_rate([&] { return pull(it); }, parallel == 1 ? "heavy map x1" : "heavy map x2");
  };
  double heavy1 = heavy(1), heavy2 = heavy(2);
  return {heavy1, heavy2};
}

// Seconds per step: training alone, the map alone, and the two in turn and overlapped.
struct PrefetchTimes {
  double train_s = 0, map_s = 0, in_turn_s = 0, overlapped_s = 0;
};

// A map costing about one training step, applied per batch, feeding the MLP: in turn a step
// costs input + map + train; with prefetch the input and the map run on their own thread and
// a step costs about the larger of the two. Training gets one thread so that the pipeline
// has the other core (`threads` restored after).
PrefetchTimes prefetch_overlap(const Dataset& scaled, int64_t batch_size, int threads) {
  PrefetchTimes t;
  set_intra_op_threads(1);
  MlpTrainer trainer;
  Dataset batches = scaled.shuffle(10'000, 42).repeat().batch(batch_size);
  Element batch = *batches.make_iterator().next();
  // The training step alone, on one batch held in memory.
  for (int i = 0; i < 5; ++i) trainer.step(batch);
  auto train_start = Clock::now();
  for (int i = 0; i < 50; ++i) trainer.step(batch);
  t.train_s = seconds_since(train_start) / 50;
  int64_t step_work = calibrate_burn(batch, t.train_s);
  auto map_fn = [step_work](Element e) { return burn(std::move(e), step_work); };
  std::vector<double> map_times;
  for (int i = 0; i < 7; ++i) {
    auto map_start = Clock::now();
    burn(batch, step_work);
    map_times.push_back(seconds_since(map_start));
  }
  t.map_s = median(map_times);
  Iterator in_turn = batches.map(map_fn).make_iterator();
  t.in_turn_s = train_step_seconds(in_turn, trainer, 50);
  Iterator overlapped = batches.map(map_fn).prefetch(2).make_iterator();
  t.overlapped_s = train_step_seconds(overlapped, trainer, 50);
  set_intra_op_threads(threads);
  return t;
}

// --input_experiments: the heavy map and the prefetch overlap, as JSON fields (each with a
// leading comma).
std::string input_experiments(const Dataset& scaled, int64_t batch_size, int threads) {
  auto [heavy1, heavy2] = heavy_map_rates(scaled);
  PrefetchTimes t = prefetch_overlap(scaled, batch_size, threads);
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer),
                ",\"heavy_map_elements_per_sec_1\":%.0f,\"heavy_map_elements_per_sec_2\":%.0f,"
                "\"heavy_map_speedup\":%.2f,\"train_step_ms\":%.3f,\"map_ms\":%.3f,"
                "\"step_ms_without_prefetch\":%.3f,\"step_ms_with_prefetch\":%.3f",
                heavy1, heavy2, heavy2 / heavy1, 1e3 * t.train_s, 1e3 * t.map_s, 1e3 * t.in_turn_s,
                1e3 * t.overlapped_s);
  return buffer;
}

}  // namespace

int run_input() {
  if (FLAGS_batch_size <= 0) throw InvalidArgumentError("--batch_size must be positive");
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);
  const int threads = intra_op_threads_budget();
  const int64_t batch_size = FLAGS_batch_size;
  const std::string& dir = FLAGS_data_dir;

  // Three orders of the same work, each giving float32 [B, 784] batches in [0, 1]; the
  // first and the second give bit-identical batches (scaling commutes with shuffle and
  // batch). Each runs in turn with nothing else running beside it; the headline runs
  // first, before the others leave the heap fragmented.
  Dataset scaled = io::fashion_mnist(dir, io::Split::kTrain);
  Dataset raw = io::fashion_mnist(dir, io::Split::kTrain, io::ImageFormat::kRawBytes);
  auto measure = [&](const Dataset& ds, const char* what) {
    Iterator it = ds.make_iterator();
    pull(it);  // fills the shuffle buffer
    return median_rate([&] { return pull(it); }, what);
  };
  // 1. Bytes shuffled and batched, scaled once per batch (the vectorised order).
  double scale_per_batch = measure(
      raw.shuffle(10'000, 42).repeat().batch(batch_size).map(io::scale_pixels_fn()).prefetch(),
      "scaled per batch");
  // 2. Scaled when the dataset is made; elements are views (the ARCHITECTURE.md input_fn).
  double scale_at_load =
      measure(scaled.shuffle(10'000, 42).repeat().batch(batch_size).prefetch(), "scaled at load");
  // 3. Scaled per element by a map before the shuffle.
  double scale_per_element = measure(
      raw.map(io::scale_pixels_fn()).shuffle(10'000, 42).repeat().batch(batch_size).prefetch(),
      "scaled per element");

  std::string experiments;
  if (FLAGS_input_experiments) experiments = input_experiments(scaled, batch_size, threads);
  std::printf(
      "{\"batch_size\":%lld,\"threads\":%d,\"elements_per_sec_scaled_at_load\":%.0f,"
      "\"elements_per_sec_scaled_per_element\":%.0f%s,\"elements_per_sec\":%.0f}\n",
      static_cast<long long>(batch_size), threads, scale_at_load, scale_per_element,
      experiments.c_str(), scale_per_batch);
  return 0;
}

}  // namespace cadre::bench
