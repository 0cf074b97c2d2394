// The program the evaluator test runs as a chief and as an evaluator (TF_CONFIG from the
// environment): train_and_evaluate on the test classifier, a checkpoint every 10 steps,
// keep_checkpoint_max 2, steps slowed by STEP_MS so that the evaluator runs beside them.
// The evaluator starts at once and evaluates without a throttle unless EVAL_START_DELAY_SECS
// and EVAL_THROTTLE_SECS say otherwise.
//
//   estimator_role_helper MODEL_DIR MAX_STEPS STEP_MS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cadre/estimator/train_and_evaluate.h"
#include "tests/estimator/test_model.h"

namespace {

class Slow : public cadre::Hook {
 public:
  explicit Slow(int ms) : ms_(ms) {}
  void after_run(cadre::Run&, const cadre::StepResult&, cadre::RunContext&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  int ms_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: estimator_role_helper MODEL_DIR MAX_STEPS STEP_MS\n";
    return 2;
  }
  try {
    cadre::RunConfig config = cadre::RunConfig::from_environment();
    config.model_dir = argv[1];
    config.tf_random_seed = 42;
    config.save_checkpoints_steps = 10;
    config.keep_checkpoint_max = 2;
    cadre::Estimator estimator(cadre::testing::classifier_fn, config);
    cadre::EvalSpec eval_spec(cadre::testing::eval_input, /*steps=*/0);
    const char* delay = std::getenv("EVAL_START_DELAY_SECS");
    const char* throttle = std::getenv("EVAL_THROTTLE_SECS");
    eval_spec.start_delay_secs = delay ? std::atof(delay) : 0;
    eval_spec.throttle_secs = throttle ? std::atof(throttle) : 0;
    cadre::TrainAndEvaluateResult result =
        cadre::train_and_evaluate(estimator,
                                  cadre::TrainSpec(cadre::testing::train_input, std::atoll(argv[2]),
                                                   {std::make_shared<Slow>(std::atoi(argv[3]))}),
                                  eval_spec);
    std::printf("{\"task\":\"%s\",\"global_step\":%lld}\n", config.task_type.c_str(),
                static_cast<long long>(result.final_eval.at("global_step")));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "estimator_role_helper: " << e.what() << "\n";
    return 1;
  }
}
