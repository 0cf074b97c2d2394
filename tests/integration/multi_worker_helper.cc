// The program the multi-worker tests run once per task (TF_CONFIG from the environment):
// trains the test classifier without dropout on a global batch of 12, sharded over the
// workers, with ParameterServerStrategy when the cluster has ps tasks (its variables sliced
// small, so that even this model is partitioned), MultiWorkerMirroredStrategy when it has
// several training tasks (else one device, or Mirrored on cpu:0 and cpu:1 with
// HELPER_STRATEGY=mirrored2). With
// HELPER_INPUT=unsharded the input_fn leaves sharding to the strategy's auto-sharding;
// HELPER_SEED replaces the seed 42; HELPER_STEP_SLEEP_MS paces every task's steps, so that a
// test that restarts a task knows the job is still training when the task is back.
// HELPER_SHARDED=1 has every checkpoint sharded (by the ps tasks, or by the workers under
// MultiWorkerMirrored). HELPER_TRANSPORT=gloo keeps MultiWorkerMirrored's workers on TCP,
// HELPER_OVERLAP=0 sums the gradient buckets after the backward pass, HELPER_BUCKET_BYTES sizes the
// buckets, HELPER_EMBEDDING=1 adds an embedding (a sparse gradient) to the model, and
// HELPER_FAIL_AT_STEP=N makes this task's training throw at global step N (a task that
// fails on its own while the others are well), and HELPER_KEEP_AFTER_FAILURE=S makes it
// catch that error and live on for S seconds, its strategy alive, before it exits.
// HELPER_ELASTIC=1 makes the MultiWorkerMirrored group elastic (heartbeats every 0.5 s: a
// member silent for 1 s once another's collective broke is dead),
// and every training task prints a fingerprint of its variables when training ends.
// HELPER_WIDE=N adds two N-unit layers, the second an [N, N] kernel that a sharded checkpoint
// splits by rows.
//
//   multi_worker_helper MODEL_DIR MAX_STEPS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "cadre/estimator/hooks.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "cadre/nn/variable_store.h"
#include "cadre/strategies/mirrored_strategy.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "tests/estimator/test_model.h"

namespace {

cadre::Dataset sharded_batches(const cadre::InputContext& context) {
  auto [x, y] = cadre::testing::classification_data(cadre::testing::kExamples);
  cadre::Dataset examples = cadre::Dataset::from_tensor_slices(cadre::Features{{"x", x}}, y);
  const char* input = std::getenv("HELPER_INPUT");
  if (!input || std::string(input) != "unsharded") {
    examples = examples.shard(context.num_input_pipelines, context.input_pipeline_id);
  }
  return examples.repeat().batch(context.per_replica_batch_size(12));
}

class PacingHook : public cadre::Hook {
 public:
  explicit PacingHook(int milliseconds) : milliseconds_(milliseconds) {}
  void before_run(cadre::Run&, cadre::RunContext&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds_));
  }

 private:
  int milliseconds_;
};

class FailingHook : public cadre::Hook {
 public:
  explicit FailingHook(int64_t step) : step_(step) {}
  void before_run(cadre::Run& run, cadre::RunContext&) override {
    if (run.global_step() >= step_) {
      throw std::runtime_error("HELPER_FAIL_AT_STEP: failing at step " +
                               std::to_string(run.global_step()));
    }
  }

 private:
  int64_t step_;
};

// Prints a hash (FNV-1a) of the bytes of every variable, by name, as training ends: the
// workers of a synchronous job end with the same bits.
class FingerprintHook : public cadre::Hook {
 public:
  explicit FingerprintHook(std::string task) : task_(std::move(task)) {}
  void end(cadre::Run& run) override {
    std::vector<cadre::nn::Variable*> variables = run.store().variables();
    std::sort(variables.begin(), variables.end(),
              [](auto* a, auto* b) { return a->name() < b->name(); });
    uint64_t hash = 1469598103934665603ULL;
    for (cadre::nn::Variable* v : variables) {
      cadre::Tensor value = v->tensor().contiguous();
      const auto* bytes = static_cast<const unsigned char*>(value.raw_data());
      for (size_t i = 0; i < value.nbytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    std::printf("{\"task\":\"%s\",\"fingerprint\":\"%016llx\",\"variables\":%zu}\n", task_.c_str(),
                static_cast<unsigned long long>(hash), variables.size());
    std::fflush(stdout);
  }

 private:
  std::string task_;
};

bool elastic() {
  const char* e = std::getenv("HELPER_ELASTIC");
  return e && *e == '1';
}

// MultiWorkerMirrored's options as the HELPER_ variables set them.
cadre::MultiWorkerOptions multi_worker_options() {
  cadre::MultiWorkerOptions options;
  options.registration_timeout_seconds = 60;
  options.collective_timeout_seconds = 60;
  options.coordination.heartbeat_timeout_seconds = 5;
  if (const char* t = std::getenv("HELPER_TRANSPORT"); t && std::string(t) == "gloo") {
    options.shared_memory = false;
  }
  if (const char* o = std::getenv("HELPER_OVERLAP"); o && std::string(o) == "0") {
    options.overlap_gradients = false;
  }
  if (const char* b = std::getenv("HELPER_BUCKET_BYTES"); b && *b) {
    options.bucket_bytes = options.first_bucket_bytes = std::strtoull(b, nullptr, 10);
  }
  if (const char* p = std::getenv("HELPER_PIECE_BYTES"); p && *p) {
    options.piece_bytes = std::strtoull(p, nullptr, 10);
  }
  if (const char* sharded = std::getenv("HELPER_SHARDED"); sharded && *sharded == '1') {
    options.sharded_checkpoint_min_bytes = 0;
  }
  if (elastic()) {
    options.coordination.elastic = true;
    // Not faster: a loaded machine's heartbeat threads must not look dead.
    options.coordination.heartbeat_interval_seconds = 0.5;
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: multi_worker_helper MODEL_DIR MAX_STEPS\n";
    return 2;
  }
  try {
    cadre::RunConfig config = cadre::RunConfig::from_environment();
    config.model_dir = argv[1];
    config.tf_random_seed = 42;
    if (const char* seed = std::getenv("HELPER_SEED"); seed && *seed) {
      config.tf_random_seed = std::atoll(seed);
    }
    config.save_checkpoints_steps = 10;
    if (config.num_ps_replicas > 0) {
      cadre::ParameterServerOptions options;
      options.placement.min_slice_bytes = 64;
      options.connect_timeout_seconds = 60;
      options.init_timeout_seconds = 60;
      if (const char* sharded = std::getenv("HELPER_SHARDED"); sharded && *sharded == '1') {
        options.sharded_checkpoint_min_bytes = 0;
      }
      config.train_distribute =
          cadre::ParameterServerStrategy::create(*config.cluster, {cadre::Device::cpu(0)}, options);
    } else if (config.num_worker_replicas > 1) {
      config.train_distribute = cadre::MultiWorkerMirroredStrategy::create(
          *config.cluster, {cadre::Device::cpu(0)}, multi_worker_options());
    } else if (const char* s = std::getenv("HELPER_STRATEGY"); s && std::string(s) == "mirrored2") {
      config.train_distribute =
          cadre::MirroredStrategy::create({cadre::Device::cpu(0), cadre::Device::cpu(1)});
    }
    const char* embedding = std::getenv("HELPER_EMBEDDING");
    const char* wide = std::getenv("HELPER_WIDE");
    cadre::Estimator estimator(cadre::testing::classifier_fn, config,
                               {{"dropout", 0.0},
                                {"embedding", embedding && *embedding == '1' ? 1.0 : 0.0},
                                {"wide", wide && *wide ? std::atof(wide) : 0.0}});
    cadre::EvalSpec eval_spec(cadre::testing::eval_input, 0);
    eval_spec.start_delay_secs = 0;
    eval_spec.throttle_secs = 0;
    cadre::Hooks hooks;
    if (const char* pace = std::getenv("HELPER_STEP_SLEEP_MS"); pace && *pace) {
      hooks.push_back(std::make_shared<PacingHook>(std::atoi(pace)));
    }
    if (const char* fail = std::getenv("HELPER_FAIL_AT_STEP"); fail && *fail) {
      hooks.push_back(std::make_shared<FailingHook>(std::atoll(fail)));
    }
    if (elastic()) {
      hooks.push_back(std::make_shared<FingerprintHook>(config.task_type + ":" +
                                                        std::to_string(config.task_id)));
    }
    cadre::TrainSpec train_spec(sharded_batches, std::atoll(argv[2]), hooks);
    if (const char* keep = std::getenv("HELPER_KEEP_AFTER_FAILURE"); keep && *keep) {
      try {
        cadre::train_and_evaluate(estimator, train_spec, eval_spec);
      } catch (const std::exception& e) {
        std::cerr << "multi_worker_helper: caught " << e.what() << "; living on" << std::endl;
        std::this_thread::sleep_for(std::chrono::seconds(std::atoi(keep)));
        throw;
      }
    }
    cadre::TrainAndEvaluateResult result =
        cadre::train_and_evaluate(estimator, train_spec, eval_spec);
    std::printf("{\"task\":\"%s\",\"global_step\":%lld}\n", config.task_type.c_str(),
                static_cast<long long>(result.final_eval.at("global_step")));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "multi_worker_helper: " << e.what() << "\n";
    return 1;
  }
}
