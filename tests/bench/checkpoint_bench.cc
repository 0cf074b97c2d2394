// What writing one checkpoint costs its thread: the CPU column is the writer thread's time
// (user and kernel), which training pays for when every core is busy. The checkpoint has
// the Fashion-MNIST MLP's variables, Adam slots and input state, whose size varies from
// save to save as in training; as under retention, each iteration also deletes the file
// written five iterations earlier. /0 writes each file with write_checkpoint_file, /1 with
// one CheckpointFileWriter (as CheckpointManager does).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <string>

#include "cadre/checkpoint/manager.h"
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
  // The shape of a shuffled, batched, prefetched pipeline's state: the prefetched batches'
  // origins and a dozen small entries (the shuffle's among them: the rows it drew).
  data.iterator_state["input/input/buffer_origins"] = Tensor::zeros({1600}, DType::kUInt8);
  for (int i = 0; i < 12; ++i) {
    data.iterator_state[str_cat("input/entry_", i)] = Tensor::scalar<int64_t>(i);
  }
  data.attributes["strategy"] = "one_device";
  return data;
}

void BM_WriteMlpCheckpoint(benchmark::State& state) {
  const bool in_a_row = state.range(0) == 1;
  checkpoint::CheckpointData data = mlp_checkpoint();
  checkpoint::CheckpointFileWriter writer;
  std::string dir = str_cat(std::filesystem::temp_directory_path().string(),
                            "/cadre_checkpoint_bench.", ::getpid());
  std::filesystem::create_directories(dir);
  checkpoint::WriteOptions options;
  options.durable = false;  // as most saves under checkpoint_durable_secs
  std::deque<std::string> kept;
  int64_t step = 0;
  for (auto _ : state) {
    std::string path = str_cat(dir, "/model.ckpt-", ++step, ".h5");
    data.iterator_state["input/input/buffer_origins"] =
        Tensor::zeros({1500 + 50 * (step % 7)}, DType::kUInt8);
    if (in_a_row) {
      writer.write(path, data, options);
    } else {
      checkpoint::write_checkpoint_file(path, data, options);
    }
    kept.push_back(path);
    if (kept.size() > 5) {
      ::unlink(kept.front().c_str());
      kept.pop_front();
    }
  }
  std::filesystem::remove_all(dir);
}
// The whole of a CheckpointManager's save, synchronous so that all of it runs on this
// thread: the file, publishing it (rename, state file with its fsync) and retention's
// deletion of the sixth-newest. Saves are not durable, as most under durable_every_secs.
void BM_ManagerSave(benchmark::State& state) {
  checkpoint::CheckpointData data = mlp_checkpoint();
  std::string dir =
      str_cat(std::filesystem::temp_directory_path().string(), "/cadre_manager_bench.", ::getpid());
  {
    checkpoint::CheckpointManagerOptions options;
    options.durable_every_secs = 3600;
    checkpoint::CheckpointManager manager(dir, options);
    int64_t step = 0;
    for (auto _ : state) {
      data.global_step = ++step;
      data.iterator_state["input/input/buffer_origins"] =
          Tensor::zeros({1500 + 50 * (step % 7)}, DType::kUInt8);
      manager.save(data);
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ManagerSave)->Unit(benchmark::kMillisecond);

BENCHMARK(BM_WriteMlpCheckpoint)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cadre
