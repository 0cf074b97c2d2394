// Internal to the checkpoint module: the names TensorFlow's Estimator gives what is not a
// model variable, beside Cadre's. A model variable keeps its name both ways; an optimizer
// slot is "<variable>/<Optimizer>/<slot>" here and "training/<Optimizer>/<variable>/<slot>"
// there (Keras optimizers under tf.estimator: training/Adam/dnn/logits/kernel/m), and the
// step counter "<Optimizer>/iterations" here, "training/<Optimizer>/iter" there.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "cadre/checkpoint/reader.h"

namespace cadre::checkpoint::internal {

// The TensorFlow name of Cadre's `name` (`info` says whether it is a slot, and of what).
std::string tf_name(const std::string& name, const VariableInfo& info);

// Cadre's name and slot_of for TensorFlow's `tf_name`, given the checkpoint's other names
// (a slot's variable must be among them); nullopt when the name is the same both ways.
struct CadreName {
  std::string name;
  std::string slot_of;
};
std::optional<CadreName> cadre_name(const std::string& tf_name,
                                    const std::map<std::string, VariableInfo>& tf_tensors);

}  // namespace cadre::checkpoint::internal
