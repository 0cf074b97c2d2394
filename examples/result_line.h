// The JSON result line the example programs print last (CONTRACTS.md: one line an
// orchestrator can parse), for the metrics every example reports.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "cadre/estimator/eval_result.h"

namespace cadre::examples {

// `,"accuracy":0.8912,"loss":0.3021` for whichever of the two `eval` holds, 4 decimals.
inline std::string metrics_json(const EvalResult& eval) {
  std::string out;
  for (const char* metric : {"accuracy", "loss"}) {
    std::optional<double> found = eval.get(metric);
    if (!found) continue;
    char value[32];
    std::snprintf(value, sizeof value, "%.4f", *found);
    out += std::string(",\"") + metric + "\":" + value;
  }
  return out;
}

}  // namespace cadre::examples
