// One push of gradients (ps.proto's PushRequest per ps task) cut into parts that each fit a
// message, and sent so that the parts mean what the whole would:
//
// - The first part to a ps task carries what is judged once per push: ps 0's global-step
//   count, the staleness bound, the coordinator's unit and the worker's input pipeline and
//   position (input_positions.h). When ps 0 drops the push (too
//   stale, or a unit already complete), no gradient goes anywhere.
// - The chief's optimizer state (slots, then which variables they initialise and the step
//   counter) comes in the first parts, before any gradient, so that gradients never wait
//   for state still to come.
// - A task's parts go in order; the first with gradients counts the optimizer step, and
//   the later ones apply at that step (PushRequest.step), so that a split push updates
//   Adam's counters as one push does.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "strategies/ps/ps.pb.h"
#include "strategies/ps/ps_client.h"

namespace cadre::ps {

// Whether `request` has anything for a ps task to do beyond counting the global step.
bool carries_anything(const PushRequest& request);

// `request` as it is when it takes at most `budget` bytes; otherwise in parts of at most
// `budget` bytes each (a single item larger than that alone), as the file comment says.
std::vector<PushRequest> split_push(PushRequest request, int64_t budget);

// Sends `requests[p]` to `clients[p]` for each p of `which`, each split under `budget`,
// every task's parts concurrently with the others'. With `first_decides` (which[0] must be
// 0), ps 0's first part goes alone first; if it comes back dropped or unit_closed, the
// other parts go only for the chief's optimizer state they carry. Returns the response to
// ps 0's first part (empty when ps 0 is not in `which`). Throws what the clients throw.
PushResponse send_push(const std::vector<std::unique_ptr<PsClient>>& clients,
                       std::vector<PushRequest> requests, const std::vector<int>& which,
                       int64_t budget, bool first_decides);

}  // namespace cadre::ps
