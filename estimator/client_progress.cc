#include "estimator/client_progress.h"

#include <map>
#include <sstream>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::estimator_internal {
namespace {

constexpr char kProgressFile[] = "client_progress";

}  // namespace

std::optional<ClientProgress> read_client_progress(Env& env, const std::string& model_dir) {
  std::string path = join_path(model_dir, kProgressFile);
  if (!env.file_exists(path)) return std::nullopt;
  std::istringstream text(env.read_file(path));
  std::map<std::string, int64_t*> numbers;
  ClientProgress progress;
  numbers["generation"] = &progress.generation;
  numbers["max_steps"] = &progress.max_steps;
  numbers["steps_per_unit"] = &progress.steps_per_unit;
  numbers["checkpoint_step"] = &progress.checkpoint_step;
  numbers["units_complete"] = &progress.units_complete;
  numbers["lost"] = &progress.lost;
  std::string line;
  bool has_generation = false;
  while (std::getline(text, line)) {
    if (line.empty()) continue;
    size_t colon = line.find(": ");
    std::string key = line.substr(0, colon),
                value = colon == std::string::npos ? "" : line.substr(colon + 2);
    if (key == "finished" && (value == "true" || value == "false")) {
      progress.finished = value == "true";
      continue;
    }
    auto it = numbers.find(key);
    size_t used = 0;
    long long number = 0;
    try {
      number = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (colon == std::string::npos || it == numbers.end() || used == 0 || used != value.size()) {
      throw DataLossError(str_cat(path, ": line \"", line,
                                  "\" is not \"key: number\" for a key the client writes"));
    }
    *it->second = number;
    has_generation |= key == "generation";
  }
  if (!has_generation) throw DataLossError(str_cat(path, " names no generation"));
  return progress;
}

void write_client_progress(Env& env, const std::string& model_dir, const ClientProgress& p) {
  std::string text =
      str_cat("generation: ", p.generation, "\nmax_steps: ", p.max_steps,
              "\nsteps_per_unit: ", p.steps_per_unit, "\ncheckpoint_step: ", p.checkpoint_step,
              "\nunits_complete: ", p.units_complete, "\nlost: ", p.lost,
              "\nfinished: ", p.finished ? "true" : "false", "\n");
  write_file_atomically(env, join_path(model_dir, kProgressFile), text);
}

}  // namespace cadre::estimator_internal
