// Values held once per replica of a step, and the ways a strategy combines them.
#pragma once

#include <vector>

namespace cadre {

// Summed, or averaged with the replicas' weights (see CrossDeviceOps::batch_reduce).
enum class ReduceOp { kSum, kMean };

template <typename T>
using PerReplica = std::vector<T>;  // element r belongs to replica r

}  // namespace cadre
