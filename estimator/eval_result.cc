#include "cadre/estimator/eval_result.h"

#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

double EvalResult::at(const std::string& name) const {
  auto it = metrics_.find(name);
  if (it != metrics_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [present, value] : metrics_) names.push_back(present);
  throw NotFoundError(
      str_cat("EvalResult has no metric '", name, "'; it has: ",
              names.empty() ? std::string("nothing (in a cluster, the evaluator task evaluates)")
                            : join(names)));
}

std::optional<double> EvalResult::get(const std::string& name) const {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) return std::nullopt;
  return it->second;
}

}  // namespace cadre
