// PsVariables' pushes of an optimizer split by variable name prefix (a wide & deep model's
// Ftrl and Adagrad): the ps tasks apply one optimizer a push, so a step goes as a push a part.
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "strategies/ps/ps_variables.h"

namespace cadre::ps {

std::vector<PsVariables::Part> PsVariables::parts_of(const nn::Optimizer& optimizer,
                                                     std::vector<Gradient> gradients,
                                                     const std::vector<nn::Variable*>& targets) {
  nn::OptimizerConfig config = optimizer.config();
  std::vector<Part> parts;
  for (const nn::OptimizerConfig& part : config.parts) {
    parts.push_back({nn::optimizer_from_config(part), {}, {}});
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    size_t p = 0;
    while (p < parts.size() && !targets[i]->name().starts_with(config.parts[p].prefix)) ++p;
    if (p == parts.size()) {
      throw InvalidArgumentError(
          str_cat("variable '", targets[i]->name(), "' is under none of the optimizers' prefixes"));
    }
    parts[p].gradients.push_back(i < gradients.size() ? std::move(gradients[i]) : Gradient());
    parts[p].targets.push_back(targets[i]);
  }
  return parts;
}

void PsVariables::push(nn::Optimizer& optimizer, std::vector<Gradient> gradients,
                       const std::vector<nn::Variable*>& targets) {
  if (optimizer.config().kind != "split") {
    push_part(optimizer, std::move(gradients), targets, /*counts_the_step=*/true);
    return;
  }
  // The ps tasks apply one optimizer a push: a push a part (a wide & deep model's Ftrl, then
  // its Adagrad), the last counting the step and carrying a coordinator's unit. Should the
  // unit's ledger refuse that last push, the earlier parts have landed: in coordinator mode
  // a step's first part may apply once more than the units count.
  std::vector<Part> parts = parts_of(optimizer, std::move(gradients), targets);
  for (size_t p = 0; p < parts.size(); ++p) {
    push_part(*parts[p].optimizer, std::move(parts[p].gradients), parts[p].targets,
              p + 1 == parts.size());
  }
}

void PsVariables::send_optimizer_state(nn::Optimizer& optimizer,
                                       const std::vector<nn::Variable*>& targets) {
  if (optimizer.config().kind != "split") {
    send_part_state(optimizer, targets);
    return;
  }
  for (Part& part : parts_of(optimizer, {}, targets)) {
    send_part_state(*part.optimizer, part.targets);
  }
}

}  // namespace cadre::ps
