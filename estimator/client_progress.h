// The client's schedule and progress in model_dir (coordinator mode, docs/DEPLOY.md), so
// that a client started after one that died takes over: model_dir/client_progress, a few
// "key: value" lines written atomically at the client's start and with every checkpoint.
//
//   generation: 3          the client that wrote it; the next takes a higher one, and ps 0
//                          refuses the steps of units an earlier client dispatched
//   max_steps: 2000        the schedule: the global step to reach,
//   steps_per_unit: 10     in units of this many steps
//   checkpoint_step: 1500  the last checkpoint the client saved, where a new one resumes
//   units_complete: 150    units ps 0 counted complete, lost dispatches, and whether the
//   lost: 2                schedule was done
//   finished: false
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cadre/base/env.h"

namespace cadre::estimator_internal {

struct ClientProgress {
  int64_t generation = 0;
  int64_t max_steps = 0;
  int64_t steps_per_unit = 0;
  int64_t checkpoint_step = 0;
  int64_t units_complete = 0;
  int64_t lost = 0;
  bool finished = false;
};

// nullopt when model_dir has none; DataLossError naming the file and the line at fault when
// it cannot be read.
std::optional<ClientProgress> read_client_progress(Env& env, const std::string& model_dir);
void write_client_progress(Env& env, const std::string& model_dir, const ClientProgress& progress);

}  // namespace cadre::estimator_internal
