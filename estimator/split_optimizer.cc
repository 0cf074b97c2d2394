#include "estimator/split_optimizer.h"

#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"

namespace cadre::estimator_internal {

SplitOptimizer::SplitOptimizer(std::vector<Part> parts)
    : nn::Optimizer(parts.back().second->name(), parts.back().second->learning_rate(),
                    parts.back().second->options()),
      parts_(std::move(parts)) {}

void SplitOptimizer::apply_gradients(std::vector<Gradient> gradients,
                                     const std::vector<nn::Variable*>& variables) {
  if (gradients.size() != variables.size()) {
    throw InvalidArgumentError(str_cat(name(), ".apply_gradients: ", gradients.size(),
                                       " gradients for ", variables.size(), " variables"));
  }
  std::vector<std::vector<Gradient>> part_gradients(parts_.size());
  std::vector<std::vector<nn::Variable*>> part_variables(parts_.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    size_t p = 0;
    while (p < parts_.size() && !variables[i]->name().starts_with(parts_[p].first)) ++p;
    if (p == parts_.size()) {
      throw InvalidArgumentError(str_cat("variable '", variables[i]->name(),
                                         "' is under none of the optimizers' prefixes"));
    }
    part_gradients[p].push_back(std::move(gradients[i]));
    part_variables[p].push_back(variables[i]);
  }
  for (size_t p = 0; p < parts_.size(); ++p) {
    parts_[p].second->apply_gradients(std::move(part_gradients[p]), part_variables[p]);
  }
}

void SplitOptimizer::build(const std::vector<nn::Variable*>& variables) const {
  for (const auto& [prefix, optimizer] : parts_) {
    std::vector<nn::Variable*> mine;
    for (nn::Variable* v : variables) {
      if (v->name().starts_with(prefix)) mine.push_back(v);
    }
    optimizer->build(mine);
  }
}

nn::OptimizerConfig SplitOptimizer::config() const {
  nn::OptimizerConfig config;
  config.kind = "split";
  for (const auto& [prefix, optimizer] : parts_) {
    nn::OptimizerConfig part = optimizer->config();
    part.prefix = prefix;
    config.parts.push_back(std::move(part));
  }
  return config;
}

void SplitOptimizer::apply_dense(std::span<Tensor>, std::span<const Tensor>,
                                 std::vector<std::vector<Tensor>>&, double, int64_t) {
  LOG(FATAL) << "SplitOptimizer::apply_dense: updates go to the parts";
}

}  // namespace cadre::estimator_internal
