// A training program for InputShardsTest and tools/chaos/resize_chaos.py: epochs of 480
// numbered examples read as 8 input shards, one process, or per TF_CONFIG MultiWorkerMirrored
// or (with ps tasks) ParameterServerStrategy. Every example a training step takes is appended
// to SEEN_PREFIX-<pid> as "<step> <number>" so that one can count them over jobs of different
// sizes, also jobs killed part-way (whose steps past the checkpoint resumed from count for
// nothing, as do a killed elastic worker's steps from the one its group went on from): the
// global step the step started at, written before the step's gradients leave the process;
// under ParameterServerStrategy written as -1 (pending) before the push and again, with the
// one before the global step its push counted, once it did (a worker killed in between
// leaves them pending: whether the push counted, only ps 0 knows). In coordinator mode a
// worker's examples under the client of generation G > 1 (model_dir/client_progress) go to
// SEEN_PREFIX-<pid>-g<G>: a new client restores a checkpoint, and what the workers took under
// the one before past its step counts for nothing. Optional
// environment: INPUT_SHARDS_EPOCHS (1), INPUT_SHARDS_STEP_MS (0: a pause per step),
// INPUT_SHARDS_SAVE_STEPS (1000: the checkpoint interval), INPUT_SHARDS_DETERMINISTIC (0; 1:
// RunConfig.deterministic, and dropout, whose random streams it must make alike),
// INPUT_SHARDS_COUNT (8; 0: a pipeline per worker, shard(workers, w)), INPUT_SHARDS_SHUFFLE (1; 0:
// each shard in the order of its numbers), INPUT_SHARDS_ELASTIC (0; 1: an elastic group, heartbeats
// every 0.5 s), INPUT_SHARDS_DIE_AFTER (0; N: worker:0 SIGKILLs itself after step N, once per
// model_dir; under ParameterServerStrategy after its own N-th step), INPUT_SHARDS_COMEBACK_MS (0:
// how long worker:0, restarted after that, waits before it starts), INPUT_SHARDS_UNEVEN (0; 1:
// input shard v keeps 8v examples fewer than the first).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cadre/estimator/estimator.h"
#include "cadre/estimator/planned_stop.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "tests/estimator/test_model.h"

namespace {

constexpr int64_t kNumbered = 480;
constexpr int64_t kGlobalBatch = 16;

std::string seen_file;
std::string progress_file;  // coordinator mode's client's progress
std::string step_file;      // where the step under way writes its examples
std::atomic<int64_t> current_step{-1};
bool on_ps = false;  // ParameterServerStrategy: examples written after the push

int64_t from_environment(const char* name, int64_t otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoll(value) : otherwise;
}

cadre::Dataset numbered_examples(const cadre::InputContext& context) {
  auto [x, y] = cadre::testing::classification_data(kNumbered);
  std::vector<int64_t> ids(kNumbered);
  for (int64_t i = 0; i < kNumbered; ++i) ids[static_cast<size_t>(i)] = i;
  cadre::Dataset numbered =
      cadre::Dataset::from_tensor_slices(
          cadre::Features{{"x", x}, {"id", cadre::Tensor::from_vector(ids)}}, y)
          .shard(context.num_input_pipelines, context.input_pipeline_id);
  if (from_environment("INPUT_SHARDS_UNEVEN", 0)) {
    // Example i is element i / 8 of shard i % 8 (the shard stage moves to each shard).
    numbered = numbered.filter([](const cadre::Element& e) {
      const int64_t id = e.features.at("id").item<int64_t>();
      return id / 8 < 60 - 8 * (id % 8);
    });
  }
  if (from_environment("INPUT_SHARDS_SHUFFLE", 1)) numbered = numbered.shuffle(16, /*seed=*/5);
  return numbered.repeat(from_environment("INPUT_SHARDS_EPOCHS", 1))
      .batch(context.per_replica_batch_size(kGlobalBatch));
}

// The examples taken by the step under way (one replica per worker): a step may run model_fn
// once per input shard, and again on the same batch after its worker group changed.
std::set<int64_t> step_examples;
std::vector<int64_t> to_write;  // on_ps: those of the step, until its push counted

// seen_file, or in coordinator mode its generation's file.
std::string file_of_client() {
  std::ifstream in(progress_file);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("generation: ")) {
      int64_t generation = std::atoll(line.c_str() + std::strlen("generation: "));
      if (generation > 1) return seen_file + "-g" + std::to_string(generation);
    }
  }
  return seen_file;
}

void write_examples(int64_t step, const std::vector<int64_t>& ids) {
  std::ofstream out(step_file, std::ios::app);
  for (int64_t id : ids) out << step << " " << id << "\n";
}

cadre::EstimatorSpec counting_fn(const cadre::Features& features, const cadre::Tensor& labels,
                                 cadre::ModeKeys mode, const cadre::Params& params) {
  // Not before the first step's hooks: a worker joining an elastic group steps alone first,
  // on the batch it then steps with the group.
  if (mode == cadre::ModeKeys::kTrain && current_step.load() >= 0) {
    // After the unit's wait: the client that gave it has written its progress.
    if (!progress_file.empty()) step_file = file_of_client();
    std::vector<int64_t> taken;
    for (int64_t id : features.at("id").to_vector<int64_t>()) {
      if (step_examples.insert(id).second) taken.push_back(id);
    }
    if (on_ps) {
      // Pending (-1) until the push counted: a worker killed in between leaves them pending.
      write_examples(-1, taken);
      to_write.insert(to_write.end(), taken.begin(), taken.end());
    } else {
      write_examples(current_step.load(), taken);
    }
  }
  return cadre::testing::classifier_fn(features, labels, mode, params);
}

class StepHook : public cadre::Hook {
 public:
  explicit StepHook(bool dies) : dies_(dies) {}
  void before_run(cadre::Run& run, cadre::RunContext&) override {
    current_step = run.global_step();
    step_examples.clear();
    to_write.clear();  // of a step no hook saw (refused for a new client): pending, read again
    if (int64_t pause = from_environment("INPUT_SHARDS_STEP_MS", 0)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    }
  }
  void after_run(cadre::Run& run, const cadre::StepResult&, cadre::RunContext&) override {
    // The step its push counted, from the global step it started at: as other steps' records.
    write_examples(run.global_step() - 1, std::exchange(to_write, {}));
    ++steps_;
    const std::string marker = run.config().model_dir + "/died";
    const int64_t die_after = from_environment("INPUT_SHARDS_DIE_AFTER", 0);
    if (dies_ && (on_ps ? steps_ : run.global_step()) == die_after &&
        !std::filesystem::exists(marker)) {
      std::ofstream(marker) << getpid();
      ::raise(SIGKILL);
    }
  }

 private:
  bool dies_;
  int64_t steps_ = 0;  // this process's
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: input_shards_helper MODEL_DIR MAX_STEPS SEEN_PREFIX\n";
    return 2;
  }
  try {
    seen_file = std::string(argv[3]) + "-" + std::to_string(getpid());
    step_file = seen_file;
    cadre::RunConfig config = cadre::RunConfig::from_environment();
    config.model_dir = argv[1];
    if (config.cluster && config.cluster->has_job("client")) {
      progress_file = config.model_dir + "/client_progress";
    }
    config.tf_random_seed = 42;
    config.input_shards = from_environment("INPUT_SHARDS_COUNT", 8);
    config.save_checkpoints_steps = from_environment("INPUT_SHARDS_SAVE_STEPS", 1000);
    if (config.num_ps_replicas > 0) {
      cadre::ParameterServerOptions options;
      options.connect_timeout_seconds = 60;
      options.init_timeout_seconds = 60;
      config.train_distribute =
          cadre::ParameterServerStrategy::create(*config.cluster, {cadre::Device::cpu(0)}, options);
      on_ps = true;
    } else if (config.num_worker_replicas > 1) {
      cadre::MultiWorkerOptions options;
      options.registration_timeout_seconds = 60;
      options.collective_timeout_seconds = 60;
      if (from_environment("INPUT_SHARDS_ELASTIC", 0)) {
        options.coordination.elastic = true;
        options.coordination.heartbeat_interval_seconds = 0.5;
      }
      config.train_distribute = cadre::MultiWorkerMirroredStrategy::create(
          *config.cluster, {cadre::Device::cpu(0)}, options);
    }
    const bool dies = config.task_type == "worker" && config.task_id == 0;
    if (dies && std::filesystem::exists(config.model_dir + "/died")) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(from_environment("INPUT_SHARDS_COMEBACK_MS", 0)));
    }
    config.deterministic = from_environment("INPUT_SHARDS_DETERMINISTIC", 0) == 1;
    cadre::Estimator estimator(counting_fn, config,
                               {{"dropout", config.deterministic ? 0.2 : 0.0}});
    auto hook = std::make_shared<StepHook>(dies);
    int64_t step = 0;
    if (on_ps) {  // the ps tasks serve, the chief evaluates once at the end
      cadre::EvalSpec eval_spec(numbered_examples, 1);
      eval_spec.start_delay_secs = 0;
      eval_spec.throttle_secs = 0;
      cadre::TrainAndEvaluateResult result = cadre::train_and_evaluate(
          estimator, cadre::TrainSpec(numbered_examples, std::atoll(argv[2]), {hook}), eval_spec);
      step = static_cast<int64_t>(result.final_eval.get("global_step").value_or(0));
    } else {
      step =
          estimator.train(numbered_examples, {.max_steps = std::atoll(argv[2]), .hooks = {hook}});
    }
    std::printf("{\"task\":\"%s\",\"global_step\":%lld}\n", config.task_type.c_str(),
                static_cast<long long>(step));
    return 0;
  } catch (const cadre::PlannedStopError& stop) {
    std::cerr << "input_shards_helper: " << stop.what() << "\n";
    return stop.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "input_shards_helper: " << e.what() << "\n";
    return 1;
  }
}
