// The evaluator task of train_and_evaluate (TF_CONFIG type "evaluator"): follows model_dir's
// checkpoints and evaluates those its policy asks for, until the chief's training-finished
// marker names a step it has evaluated.
#pragma once

#include "cadre/estimator/train_and_evaluate.h"

namespace cadre::estimator_internal {

EvalArgs eval_args_of(const EvalSpec& eval_spec);

// Leases the checkpoints it will want from the start (before start_delay_secs), so that
// retention keeps them; once training has finished, evaluates what is left at once (the
// throttle paces evaluations only while training runs).
TrainAndEvaluateResult run_evaluator(Estimator& estimator, const TrainSpec& train_spec,
                                     const EvalSpec& eval_spec);

}  // namespace cadre::estimator_internal
