// The program the resume test starts, kills with SIGKILL and starts again: trains the test
// classifier to a max_steps, printing "step N" after every step, then prints the final
// checkpoint's evaluation loss as "final <step> <loss>" with full precision.
//
//   estimator_resume_helper MODEL_DIR MAX_STEPS
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cadre/estimator/estimator.h"
#include "tests/estimator/test_model.h"

namespace {

class PrintSteps : public cadre::Hook {
 public:
  void after_run(cadre::Run& run, const cadre::StepResult& result,
                 cadre::RunContext& context) override {
    std::printf("step %lld %.17g\n", static_cast<long long>(result.global_step), result.loss);
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: estimator_resume_helper MODEL_DIR MAX_STEPS\n";
    return 2;
  }
  try {
    cadre::RunConfig config = cadre::testing::test_config(argv[1], /*save_steps=*/10);
    config.keep_checkpoint_max = 3;
    cadre::Estimator estimator(cadre::testing::classifier_fn, config);
    estimator.train(cadre::testing::train_input,
                    {.max_steps = std::atoll(argv[2]), .hooks = {std::make_shared<PrintSteps>()}});
    cadre::EvalResult result = estimator.evaluate(cadre::testing::eval_input);
    std::printf("final %lld %.17g\n", static_cast<long long>(result.at("global_step")),
                result.at("loss"));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "estimator_resume_helper: " << e.what() << "\n";
    return 1;
  }
}
