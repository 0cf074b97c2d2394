// Sparse gradients across workers: every worker's rows (an embedding's gradient holds only
// the rows its batch looked up), gathered rather than summed as a dense table, so that a
// step moves the rows touched, not the vocabulary.
#pragma once

#include "cadre/autodiff/gradient.h"
#include "strategies/strategy_extended.h"

namespace cadre {

// The rows of every worker, concatenated in worker order (collective): the sum over the
// workers, as repeated rows add up when applied. `mine` is this worker's.
IndexedSlices all_gather_rows(const StrategyExtended& extended, const IndexedSlices& mine);

}  // namespace cadre
