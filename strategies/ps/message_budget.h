// How every message to or from a ps task stays under ParameterServerOptions.max_message_bytes
// whatever the variables' sizes, so that the limit is a transport detail users never meet:
// variables are cut into row slices of at most a quarter of it (placement.h), and messages
// that carry several slices (pulls, pushes, a checkpoint's reads) are cut into batches of at
// most half of it. The margins cover what a slice costs beyond its bytes: a sparse
// gradient's row ids (8 bytes a row), names and protobuf framing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cadre::ps {

// The most bytes of a slice's value (or a slot's) that one of the chief's messages carries
// when it fills a ps task: the task holds a chunk's message, not a slice's, beside its share.
constexpr int64_t kFillChunkBytes = int64_t{4} << 20;

// The largest slice of a variable under a message limit of `max_message_bytes`.
int64_t max_slice_bytes(int64_t max_message_bytes);
// The most bytes of tensors that one batched message carries.
int64_t max_batch_bytes(int64_t max_message_bytes);
// What a tensor of `bytes` named `name` costs in a batch: its bytes, its name, framing.
int64_t item_cost(int64_t bytes, const std::string& name);
// Consecutive runs of items whose `costs` add up to at most `budget` (an item over it
// alone), as [begin, end) index ranges in order; none for no items.
std::vector<std::pair<size_t, size_t>> batches(const std::vector<int64_t>& costs, int64_t budget);

}  // namespace cadre::ps
