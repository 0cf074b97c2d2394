// Deterministic checkpoint contents for the tests and the crash helper (no gtest here).
#pragma once

#include <vector>

#include "cadre/checkpoint/contents.h"
#include "cadre/tensor/tensor.h"

namespace cadre::checkpoint::testing {

// Values that differ per element and per name: i * scale + offset.
inline Tensor ramp(const Shape& shape, float scale = 1, float offset = 0) {
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * scale + offset;
  return Tensor::from_vector(values, shape);
}

// A small model: two dense layers with Adam slots and the optimizer's step counter.
inline CheckpointData small_model(int64_t step, float offset = 0) {
  CheckpointData data;
  data.global_step = step;
  data.variables["hidden1/kernel"] = ramp({4, 3}, 1, offset);
  data.variables["hidden1/bias"] = ramp({3}, 0.5f, offset);
  data.variables["logits/kernel"] = ramp({3, 2}, -1, offset);
  data.variables["hidden1/kernel/Adam/m"] = ramp({4, 3}, 0.25f, offset);
  data.variables["hidden1/kernel/Adam/v"] = ramp({4, 3}, 0.125f, offset);
  data.variables["Adam/iterations"] = Tensor::scalar<int64_t>(step);
  data.slot_of["hidden1/kernel/Adam/m"] = "hidden1/kernel";
  data.slot_of["hidden1/kernel/Adam/v"] = "hidden1/kernel";
  data.rng_states["global"] = {42, 7, static_cast<uint64_t>(step) * 10};
  data.iterator_state["shard_0/position"] = Tensor::scalar<int64_t>(step * 32);
  data.iterator_state["shard_0/cursor"] = bytes_to_tensor("epoch=1;file=train-00001");
  data.attributes["strategy"] = "MirroredStrategy";
  data.attributes["topology"] = "1 worker x 2 cpu";
  return data;
}

}  // namespace cadre::checkpoint::testing
