// The signature of a model's input function: given where its pipeline runs, the Dataset it
// reads. The Estimator takes one per run (train, evaluate, predict) and a strategy spreads
// what it returns over the replicas (Strategy::distribute_datasets_from_function).
#pragma once

#include <functional>

#include "cadre/io/dataset.h"
#include "cadre/io/input_context.h"

namespace cadre {

using InputFn = std::function<io::Dataset(const io::InputContext& context)>;

}  // namespace cadre
