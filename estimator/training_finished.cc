#include "estimator/training_finished.h"

#include <cstdio>

#include "cadre/base/errors.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "core/base/strings.h"

namespace cadre {
namespace estimator_internal {
namespace {

constexpr char kFinishedFile[] = "training_finished";

}  // namespace

std::optional<TrainingFinished> read_finished_marker(Env& env, const std::string& model_dir) {
  std::string path = join_path(model_dir, kFinishedFile);
  if (!env.file_exists(path)) return std::nullopt;
  std::string text = env.read_file(path);
  long long step = 0, max_steps = 0;
  int read = std::sscanf(text.c_str(), "training finished at step %lld (max_steps %lld)", &step,
                         &max_steps);
  if (read < 1) {
    throw DataLossError(str_cat(path, " does not say \"training finished at step N\": ", text));
  }
  TrainingFinished marker;
  marker.step = step;
  if (read == 2) marker.max_steps = max_steps;
  return marker;
}

void write_finished_marker(Env& env, const std::string& model_dir, const TrainingFinished& marker) {
  std::string text = str_cat("training finished at step ", marker.step);
  if (marker.max_steps) text += str_cat(" (max_steps ", *marker.max_steps, ")");
  write_file_atomically(env, join_path(model_dir, kFinishedFile), text + "\n");
}

void remove_finished_marker(Env& env, const std::string& model_dir) {
  env.remove_file(join_path(model_dir, kFinishedFile));
}

std::optional<int64_t> final_step_of(const std::optional<TrainingFinished>& marker,
                                     std::optional<int64_t> max_steps) {
  if (!marker) return std::nullopt;
  if (!max_steps || marker->max_steps == max_steps || marker->step >= *max_steps) {
    return marker->step;
  }
  return std::nullopt;
}

}  // namespace estimator_internal

std::optional<int64_t> read_training_finished(const std::string& model_dir,
                                              const std::shared_ptr<Env>& env) {
  auto marker = estimator_internal::read_finished_marker(env ? *env : *posix_env(), model_dir);
  if (!marker) return std::nullopt;
  return marker->step;
}

}  // namespace cadre
