// The JSON result line the example programs print last (CONTRACTS.md: one line an
// orchestrator can parse), for the metrics every example reports.
#pragma once

#include <cstdio>
#include <map>
#include <string>

namespace cadre::examples {

// `,"accuracy":0.8912,"loss":0.3021` for whichever of the two `eval` holds, 4 decimals.
inline std::string metrics_json(const std::map<std::string, double>& eval) {
  std::string out;
  for (const char* metric : {"accuracy", "loss"}) {
    auto it = eval.find(metric);
    if (it == eval.end()) continue;
    char value[32];
    std::snprintf(value, sizeof value, "%.4f", it->second);
    out += std::string(",\"") + metric + "\":" + value;
  }
  return out;
}

}  // namespace cadre::examples
