// What writing one checkpoint costs its thread: the CPU column is the writer thread's time
// (user and kernel), which training pays for when every core is busy. The checkpoint has
// the Fashion-MNIST MLP's variables, Adam slots and input state; as under retention, each
// iteration also deletes the file written five iterations earlier.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <string>

#include "cadre/checkpoint/writer.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

checkpoint::CheckpointData mlp_checkpoint() {
  checkpoint::CheckpointData data;
  auto add = [&](const std::string& name, const Shape& shape) {
    data.variables[name] = Tensor::full(shape, 0.5);
    for (const char* slot : {"m", "v"}) {
      std::string slot_name = str_cat(name, "/Adam/", slot);
      data.variables[slot_name] = Tensor::full(shape, 0.25);
      data.slot_of[slot_name] = name;
    }
  };
  add("hidden1/kernel", {784, 256});
  add("hidden1/bias", {256});
  add("hidden2/kernel", {256, 256});
  add("hidden2/bias", {256});
  add("logits/kernel", {256, 10});
  add("logits/bias", {10});
  data.variables["Adam/iterations"] = Tensor::scalar<int64_t>(1000);
  data.rng_states["global"] = {1, 2, 3};
  // The shape of a shuffled, batched, prefetched pipeline's state: a buffer's origins and
  // a dozen small entries.
  data.iterator_state["input/input/buffer_origins"] = Tensor::zeros({28541}, DType::kUInt8);
  for (int i = 0; i < 12; ++i) {
    data.iterator_state[str_cat("input/entry_", i)] = Tensor::scalar<int64_t>(i);
  }
  data.attributes["strategy"] = "one_device";
  return data;
}

void BM_WriteMlpCheckpoint(benchmark::State& state) {
  checkpoint::CheckpointData data = mlp_checkpoint();
  std::string dir = str_cat(std::filesystem::temp_directory_path().string(),
                            "/cadre_checkpoint_bench.", ::getpid());
  std::filesystem::create_directories(dir);
  checkpoint::WriteOptions options;
  options.durable = false;  // as most saves under checkpoint_durable_secs
  std::deque<std::string> kept;
  int64_t step = 0;
  for (auto _ : state) {
    std::string path = str_cat(dir, "/model.ckpt-", ++step, ".h5");
    checkpoint::write_checkpoint_file(path, data, options);
    kept.push_back(path);
    if (kept.size() > 5) {
      ::unlink(kept.front().c_str());
      kept.pop_front();
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WriteMlpCheckpoint)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cadre
