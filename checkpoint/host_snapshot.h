// Host copies of checkpoint data: the snapshots an asynchronous save writes from while
// training goes on.
#pragma once

#include <memory>

#include "cadre/checkpoint/contents.h"
#include "core/nn/deferred_copy.h"

namespace cadre::checkpoint {

// The copy of `data`'s tensors into host memory, to be run later: each tensor of `data` is
// replaced by its copy, made into the tensor of the same name in `old` (an earlier
// snapshot nobody uses any more) when it fits. That spares the allocation and the page
// faults of fresh memory, which cost more than the copy itself. `data` and `old` must
// outlive the copy.
std::shared_ptr<nn::DeferredCopy> host_copy_of(CheckpointData& data, const CheckpointData* old);

// A deep host copy of `data`, made now, into `reuse`'s memory where it fits (may be null).
// Throws the copy's error.
CheckpointData copy_to_host(const CheckpointData& data, const CheckpointData* reuse = nullptr);

}  // namespace cadre::checkpoint
