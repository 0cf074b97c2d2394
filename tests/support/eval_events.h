// What an evaluator left in model_dir: the evaluations its event files record.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "cadre/io/event_file.h"

namespace cadre::testing {

// How many evaluations model_dir/`eval_dir` records for each step (its "loss" summaries).
inline std::map<int64_t, int> evaluations(const std::string& model_dir,
                                          const std::string& eval_dir = "eval") {
  std::map<int64_t, int> count;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir + "/" + eval_dir)) {
    for (const io::Event& event : io::read_event_file(entry.path().string())) {
      for (const io::SummaryValue& v : event.values) {
        if (v.tag == "loss") ++count[event.step];
      }
    }
  }
  return count;
}

}  // namespace cadre::testing
