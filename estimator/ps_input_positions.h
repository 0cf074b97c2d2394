// Exactly-once input under ParameterServerStrategy, from the training loop's side: each
// worker's pushes count its batches on ps 0, which keeps the positions the worker sends
// (strategies/ps/input_positions.h). The chief's checkpoints hold every worker's position as
// of their step; a worker restarted while ps 0 runs on reads on from what ps 0 kept.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "cadre/checkpoint/contents.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/strategies/strategy.h"
#include "estimator/worker_states.h"
#include "strategies/ps/input_report.h"

namespace cadre::estimator_internal {

// Where a training task of parameter-server training (a worker of coordinator mode too)
// sends its input position, its pushes counting for its input pipeline from now on; null for
// other strategies and tasks.
ps::InputReport* input_report_to_ps(const Strategy& strategy);

// For the checkpoint of global step `step` of the chief (or of coordinator mode's client):
// every other worker's position as of that step, with the batches it pushed after it by
// then, which its restore skips. A worker that pushed nothing by then is where `resumed` (the
// checkpoint the job resumed from, if any) left it.
void add_positions_on_ps(const Strategy& strategy, int64_t step,
                         const checkpoint::CheckpointReader* resumed,
                         checkpoint::CheckpointData* data);

// For a worker restarted while ps 0 ran on: the position ps 0 kept for it, with the batches
// it pushed after it; nullopt where ps 0 keeps none (a new job, or a new chief).
std::optional<SavedInput> position_on_ps(const Strategy& strategy);

// Coordinator mode: the generation of the client whose units ps 0 counts now (0 before the
// first client).
int64_t client_generation_on_ps(const Strategy& strategy);

// Once this worker's input has ended: tells ps 0. On the chief, whose input may end before
// the others' (its workers step at their own pace, and a resize leaves shards uneven), then
// waits until every worker's has ended, the global step reached `max_steps`, `stop` says so,
// or the workers still reading have pushed nothing for `stalled_secs` (a worker gone for good:
// its position stays in the checkpoint). Returns the global step then.
int64_t end_input_on_ps(const Strategy& strategy, bool chief, std::optional<int64_t> max_steps,
                        const std::function<bool()>& stop, double stalled_secs = 60);

}  // namespace cadre::estimator_internal
