// Optimizers and learning-rate schedules as data (tf.keras's get_config / from_config), so
// that a parameter server can build the optimizer a worker's model_fn made and apply its
// updates where the variables live.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/nn/optimizer.h"

namespace cadre::nn {

struct ScheduleConfig {
  std::string kind;  // "exponential_decay", "piecewise_constant", "cosine_decay"
  std::map<std::string, double> numbers;
  std::map<std::string, std::vector<double>> lists;
};

struct OptimizerConfig {
  // "sgd", "adam", "adagrad", "rmsprop", "ftrl", or "split": an optimizer per variable name
  // prefix (a wide & deep model's), each in `parts` with its `prefix`, which a parameter
  // server applies one at a time (optimizer_from_config refuses it; the parts it makes).
  std::string kind;
  std::map<std::string, double> numbers;   // hyperparameters; learning_rate when constant
  std::optional<ScheduleConfig> schedule;  // the learning rate when it is a schedule
  OptimizerOptions options;                // clipping
  std::string prefix;                      // a part's: the variables it updates
  std::vector<OptimizerConfig> parts;      // "split"'s
};

// The optimizer or schedule a config describes. Throws InvalidArgumentError naming an
// unknown kind or a missing number.
std::shared_ptr<Optimizer> optimizer_from_config(const OptimizerConfig& config);
std::shared_ptr<LearningRateSchedule> schedule_from_config(const ScheduleConfig& config);

}  // namespace cadre::nn
