// The logical variables of a parameter-server run, as checkpoints hold them: read from the
// ps tasks and joined from row slices into whole tensors, whatever the placement.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cadre/nn/variable_store.h"
#include "strategies/ps/placement.h"
#include "strategies/ps/ps_client.h"

namespace cadre::ps {

// A variable that lives on the ps tasks, and where.
struct RemoteVariable {
  nn::VariableSpec spec;
  std::vector<Slice> slices;
};

// `variables` whole (in their order, row_access cleared), each with the optimizer slots
// its first slice has on the ps (named after the logical variable), and each optimizer's
// step counter ("<optimizer>/iterations": every ps task counts the pushes it applied; the
// most advanced is the optimizer's). Reads in batches under `max_message_bytes`
// (message_budget.h), from every ps task at once.
std::shared_ptr<nn::VariableStore> gather_variables(
    const std::vector<std::unique_ptr<PsClient>>& clients, int64_t max_message_bytes,
    const std::vector<RemoteVariable>& variables);

}  // namespace cadre::ps
