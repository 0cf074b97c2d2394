// The chief's word that training ended: model_dir/training_finished, written atomically at the
// end of train_and_evaluate and removed when a chief starts training again. The evaluator
// exits once it has evaluated the step it names. It also records the run's max_steps, so that
// an evaluator restarted with a resumed job (a larger max_steps) does not take the previous
// run's marker for the end of this one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cadre/base/env.h"

namespace cadre::estimator_internal {

struct TrainingFinished {
  int64_t step = 0;
  std::optional<int64_t> max_steps;  // unset: the run had none, or an old marker
};

// "training finished at step N (max_steps M)"; DataLossError naming the file when it says
// something else.
std::optional<TrainingFinished> read_finished_marker(Env& env, const std::string& model_dir);
void write_finished_marker(Env& env, const std::string& model_dir, const TrainingFinished& marker);
void remove_finished_marker(Env& env, const std::string& model_dir);

// The step a marker names if it ends the run whose TrainSpec has `max_steps`: a marker of an
// earlier run with another max_steps (that this run resumes) ends nothing until the chief
// replaces it.
std::optional<int64_t> final_step_of(const std::optional<TrainingFinished>& marker,
                                     std::optional<int64_t> max_steps);

}  // namespace cadre::estimator_internal
