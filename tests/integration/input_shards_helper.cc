// A training program for InputShardsTest: one epoch of 480 numbered examples read as 8 input
// shards, one process or MultiWorkerMirrored per TF_CONFIG. Every example a training step
// takes is appended to SEEN_PREFIX-<pid> as its number, so that a test can count them over
// jobs of different sizes.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "cadre/estimator/estimator.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "tests/estimator/test_model.h"

namespace {

constexpr int64_t kNumbered = 480;
constexpr int64_t kGlobalBatch = 16;

std::string seen_file;

cadre::Dataset numbered_examples(const cadre::InputContext& context) {
  auto [x, y] = cadre::testing::classification_data(kNumbered);
  std::vector<int64_t> ids(kNumbered);
  for (int64_t i = 0; i < kNumbered; ++i) ids[static_cast<size_t>(i)] = i;
  return cadre::Dataset::from_tensor_slices(
             cadre::Features{{"x", x}, {"id", cadre::Tensor::from_vector(ids)}}, y)
      .shard(context.num_input_pipelines, context.input_pipeline_id)
      .shuffle(16, /*seed=*/5)
      .batch(context.per_replica_batch_size(kGlobalBatch));
}

cadre::EstimatorSpec counting_fn(const cadre::Features& features, const cadre::Tensor& labels,
                                 cadre::ModeKeys mode, const cadre::Params& params) {
  if (mode == cadre::ModeKeys::kTrain) {
    std::ofstream out(seen_file, std::ios::app);
    for (int64_t id : features.at("id").to_vector<int64_t>()) out << id << "\n";
  }
  return cadre::testing::classifier_fn(features, labels, mode, params);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: input_shards_helper MODEL_DIR MAX_STEPS SEEN_PREFIX\n";
    return 2;
  }
  try {
    seen_file = std::string(argv[3]) + "-" + std::to_string(getpid());
    cadre::RunConfig config = cadre::RunConfig::from_environment();
    config.model_dir = argv[1];
    config.tf_random_seed = 42;
    config.input_shards = 8;
    config.save_checkpoints_steps = 1000;  // the checkpoint train() ends with
    if (config.num_worker_replicas > 1) {
      cadre::MultiWorkerOptions options;
      options.registration_timeout_seconds = 60;
      options.collective_timeout_seconds = 60;
      config.train_distribute = cadre::MultiWorkerMirroredStrategy::create(
          *config.cluster, {cadre::Device::cpu(0)}, options);
    }
    cadre::Estimator estimator(counting_fn, config, {{"dropout", 0.0}});
    int64_t step = estimator.train(numbered_examples, {.max_steps = std::atoll(argv[2])});
    std::printf("{\"task\":\"%s\",\"global_step\":%lld}\n", config.task_type.c_str(),
                static_cast<long long>(step));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "input_shards_helper: " << e.what() << "\n";
    return 1;
  }
}
