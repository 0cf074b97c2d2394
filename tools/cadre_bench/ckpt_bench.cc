#include "tools/cadre_bench/ckpt_bench.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/manager.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "checkpoint/host_snapshot.h"
#include "core/base/strings.h"
#include "tools/cadre_bench/timing.h"

DEFINE_string(dir, "", "ckpt: directory for the benchmark's model_dir (on the disk to measure)");
DEFINE_int32(mb, 1024, "ckpt: MiB of variables to save and restore");

namespace cadre::bench {
namespace {

// A model-shaped set of float32 variables: 16 large kernels sharing the bytes, plus
// biases, with values that differ everywhere (nothing compresses or dedups).
checkpoint::CheckpointData make_data(int64_t total_mb) {
  checkpoint::CheckpointData data;
  const int kLayers = 16;
  const int64_t columns = 1024;
  const int64_t rows = std::max<int64_t>(1, total_mb * (int64_t{1} << 20) / kLayers / 4 / columns);
  for (int layer = 0; layer < kLayers; ++layer) {
    Tensor kernel = Tensor::empty({rows, columns}, DType::kFloat32);
    float* values = kernel.data<float>();
    for (int64_t i = 0; i < kernel.numel(); ++i)
      values[i] = static_cast<float>(i % 9973) * 1e-3f + layer;
    data.variables[str_cat("layer_", layer, "/kernel")] = kernel;
    data.variables[str_cat("layer_", layer, "/bias")] = Tensor::full({columns}, layer);
  }
  data.rng_states["global"] = {42, 0, 1234};
  data.attributes["strategy"] = "benchmark";
  return data;
}

double megabytes(const checkpoint::CheckpointData& data) {
  size_t bytes = 0;
  for (const auto& [name, value] : data.variables) bytes += value.nbytes();
  return static_cast<double>(bytes) / (1 << 20);
}

// Seconds of three synchronous saves: write, fsync, rename, fsync the directory, state file.
// Retention is off so that deleting the previous file (housekeeping, not the save) stays out
// of the timing. Leaves model.ckpt-3.h5.
std::vector<double> save_seconds(const std::string& model_dir, checkpoint::CheckpointData& data) {
  checkpoint::CheckpointManagerOptions options;
  options.keep_checkpoint_max = 0;
  std::vector<double> seconds;
  checkpoint::CheckpointManager manager(model_dir, options);
  for (int run = 0; run < 3; ++run) {
    data.global_step = run + 1;
    auto start = Clock::now();
    manager.save(data);
    seconds.push_back(seconds_since(start));
  }
  return seconds;
}

// Seconds of three restores of model.ckpt-3.h5 into preallocated tensors.
std::vector<double> restore_seconds(const std::string& model_dir,
                                    const checkpoint::RestoreTargets& targets,
                                    const checkpoint::RestoreOptions& options) {
  std::vector<double> seconds;
  for (int run = 0; run < 3; ++run) {
    auto start = Clock::now();
    auto reader = checkpoint::CheckpointReader::open(model_dir + "/model.ckpt-3.h5");
    checkpoint::restore(*reader, targets, options);
    seconds.push_back(seconds_since(start));
  }
  return seconds;
}

// Asynchronous save: how long the caller is blocked (`block_seconds`), beside the host copy
// alone (`copy_seconds`), three of each.
void async_save_seconds(const std::string& model_dir, checkpoint::CheckpointData& data,
                        std::vector<double>& copy_seconds, std::vector<double>& block_seconds) {
  for (int run = 0; run < 3; ++run) {
    auto start = Clock::now();
    checkpoint::CheckpointData copy = checkpoint::copy_to_host(data);
    copy_seconds.push_back(seconds_since(start));
  }
  checkpoint::CheckpointManagerOptions options;
  options.async_save = true;
  options.keep_checkpoint_max = 1;
  checkpoint::CheckpointManager manager(model_dir, options);
  for (int run = 0; run < 3; ++run) {
    data.global_step = 10 + run;
    manager.wait();  // the previous save is not what is measured
    auto start = Clock::now();
    manager.save(data);
    block_seconds.push_back(seconds_since(start));
  }
  manager.close();
}

}  // namespace

int run_ckpt() {
  if (FLAGS_dir.empty()) throw InvalidArgumentError("ckpt: --dir is required");
  if (FLAGS_mb <= 0)
    throw InvalidArgumentError(str_cat("ckpt: --mb must be positive, got ", FLAGS_mb));
  std::string model_dir = FLAGS_dir + "/cadre_bench_ckpt";
  std::filesystem::remove_all(model_dir);
  checkpoint::CheckpointData data = make_data(FLAGS_mb);
  const double mb = megabytes(data);

  std::vector<double> saves = save_seconds(model_dir, data);
  // Restores, checksums verified, then without them: what verification costs.
  std::map<std::string, Tensor> targets;
  for (const auto& [name, value] : data.variables)
    targets[name] = Tensor::empty(value.shape(), value.dtype());
  checkpoint::RestoreTargets restore_targets = checkpoint::whole_targets(targets);
  std::vector<double> restores = restore_seconds(model_dir, restore_targets, {});
  checkpoint::RestoreOptions unverified;
  unverified.verify_checksums = false;
  std::vector<double> unverified_restores = restore_seconds(model_dir, restore_targets, unverified);
  std::vector<double> copy_seconds, block_seconds;
  async_save_seconds(model_dir, data, copy_seconds, block_seconds);
  std::filesystem::remove_all(model_dir);

  double save = mb / median(saves), restore = mb / median(restores);
  LOG(INFO) << "ckpt: " << mb << " MiB; save " << save << " MiB/s, restore " << restore
            << " MiB/s (" << mb / median(unverified_restores)
            << " MiB/s without checksums); async save blocked " << median(block_seconds) * 1e3
            << " ms, host copy " << median(copy_seconds) * 1e3 << " ms";
  std::printf(
      "{\"save_mb_per_sec\":%.1f,\"restore_mb_per_sec\":%.1f,\"async_block_ms\":%.1f,"
      "\"host_copy_ms\":%.1f,\"mb\":%.1f}\n",
      save, restore, median(block_seconds) * 1e3, median(copy_seconds) * 1e3, mb);
  return 0;
}

}  // namespace cadre::bench
