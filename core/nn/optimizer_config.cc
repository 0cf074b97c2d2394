#include "core/nn/optimizer_config.h"

#include "cadre/base/errors.h"
#include "cadre/nn/optimizers.h"
#include "core/base/strings.h"

namespace cadre::nn {
namespace {

template <typename Map>
const typename Map::mapped_type& field(const Map& map, const std::string& name,
                                       const std::string& kind) {
  auto it = map.find(name);
  if (it == map.end()) {
    throw InvalidArgumentError(str_cat("config of ", kind, " lacks '", name, "'"));
  }
  return it->second;
}

}  // namespace

std::shared_ptr<LearningRateSchedule> schedule_from_config(const ScheduleConfig& config) {
  auto number = [&](const std::string& name) { return field(config.numbers, name, config.kind); };
  if (config.kind == "exponential_decay") {
    return exponential_decay(number("initial"), static_cast<int64_t>(number("decay_steps")),
                             number("decay_rate"), number("staircase") != 0);
  }
  if (config.kind == "piecewise_constant") {
    const std::vector<double>& bounds = field(config.lists, "boundaries", config.kind);
    return piecewise_constant(std::vector<int64_t>(bounds.begin(), bounds.end()),
                              field(config.lists, "values", config.kind));
  }
  if (config.kind == "cosine_decay") {
    return cosine_decay(number("initial"), static_cast<int64_t>(number("decay_steps")),
                        number("alpha"));
  }
  throw InvalidArgumentError(str_cat("unknown learning-rate schedule '", config.kind,
                                     "'; expected exponential_decay, piecewise_constant or "
                                     "cosine_decay"));
}

std::shared_ptr<Optimizer> optimizer_from_config(const OptimizerConfig& config) {
  if (config.kind == "split") {
    throw InvalidArgumentError(
        "an optimizer split by variable name prefix is made part by part (its config's parts)");
  }
  auto number = [&](const std::string& name) { return field(config.numbers, name, config.kind); };
  LearningRate lr = config.schedule ? LearningRate(schedule_from_config(*config.schedule))
                                    : LearningRate(number("learning_rate"));
  if (config.kind == "sgd") {
    return optimizers::sgd(lr, number("momentum"), number("nesterov") != 0, config.options);
  }
  if (config.kind == "adam") {
    return optimizers::adam(lr, number("beta1"), number("beta2"), number("epsilon"),
                            config.options);
  }
  if (config.kind == "adagrad") {
    return optimizers::adagrad(lr, number("initial_accumulator_value"), number("epsilon"),
                               config.options);
  }
  if (config.kind == "rmsprop") {
    return optimizers::rmsprop(lr, number("rho"), number("momentum"), number("epsilon"),
                               number("centered") != 0, config.options);
  }
  if (config.kind == "ftrl") {
    optimizers::FtrlOptions o;
    o.learning_rate_power = number("learning_rate_power");
    o.initial_accumulator_value = number("initial_accumulator_value");
    o.l1 = number("l1_regularization_strength");
    o.l2 = number("l2_regularization_strength");
    o.l2_shrinkage = number("l2_shrinkage_regularization_strength");
    o.beta = number("beta");
    return optimizers::ftrl(lr, o, config.options);
  }
  throw InvalidArgumentError(str_cat("unknown optimizer '", config.kind,
                                     "'; expected sgd, adam, adagrad, rmsprop or ftrl"));
}

}  // namespace cadre::nn
