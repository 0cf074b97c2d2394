#include "checkpoint/model_dir_checkpoints.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>
#include <utility>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/restore.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

bool checkpoint_exists(Env& env, const std::string& path) {
  return env.file_exists(path) || (!path.empty() && env.file_exists(path + ".index"));
}

ModelDirCheckpoints find_checkpoints(Env& env, const std::string& model_dir,
                                     const std::string& basename) {
  ModelDirCheckpoints found;
  const std::string state_path = join_path(model_dir, kStateFileName);
  std::vector<std::pair<int64_t, std::string>> files =
      list_checkpoint_files(env, model_dir, basename);

  std::optional<std::string> text;
  try {
    text = env.read_file(state_path);
  } catch (const NotFoundError&) {
  }
  std::string latest;
  if (!text) {
    if (!files.empty()) {
      found.state_problem = str_cat("model_dir ", model_dir, " holds checkpoint files but no ",
                                    "state file (", state_path, ")");
    }
  } else if (blank(*text)) {
    found.state_problem = str_cat("checkpoint state file ", state_path, " is empty");
  } else {
    try {
      found.state = parse_state(*text, state_path);
    } catch (const DataLossError& error) {
      found.state_problem = error.what();
    }
  }
  if (found.state) {
    if (found.state->model_checkpoint_path.empty()) {
      found.state_problem =
          str_cat("checkpoint state file ", state_path, " names no latest checkpoint");
    } else {
      latest = resolve_checkpoint_path(model_dir, found.state->model_checkpoint_path);
      if (!checkpoint_exists(env, latest)) {
        found.state_problem = str_cat("checkpoint state file ", state_path, " names ",
                                      found.state->model_checkpoint_path, ", which does not exist");
      }
    }
  }

  // The others: what the state file lists and what the directory holds, newest step first;
  // a name without a step (another tool's) after those, in the state file's order.
  std::vector<std::pair<int64_t, std::string>> others;
  std::set<std::string> seen = {latest};
  if (found.state) {
    const auto& listed = found.state->all_model_checkpoint_paths;
    for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
      std::string path = resolve_checkpoint_path(model_dir, *it);
      if (!seen.insert(path).second) continue;
      others.emplace_back(checkpoint_step(base_name(path), basename).value_or(-1), path);
    }
  }
  for (auto& [step, path] : files) {
    if (seen.insert(path).second) others.emplace_back(step, std::move(path));
  }
  std::stable_sort(others.begin(), others.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (!latest.empty()) found.candidates.push_back(latest);
  for (auto& [step, path] : others) found.candidates.push_back(std::move(path));
  return found;
}

std::optional<CheckpointState> rebuilt_state(Env& env, const std::string& model_dir,
                                             const ModelDirCheckpoints& found,
                                             int keep_checkpoint_max, const std::string& basename) {
  std::unique_ptr<CheckpointReader> newest;
  try {
    newest = open_latest_intact(model_dir, &env, basename);
  } catch (const DataLossError& error) {
    LOG(ERROR) << "the state file of " << model_dir << " is left as it is: " << error.what();
    return std::nullopt;
  }
  if (!newest) return std::nullopt;
  // As the state file names them: relative to model_dir (those in it).
  auto relative = [&](const std::string& path) {
    std::string name = base_name(path);
    return join_path(model_dir, name) == path ? name : path;
  };
  const std::string latest = relative(newest->path());
  const int64_t latest_step =
      checkpoint_step(base_name(latest), basename).value_or(newest->global_step());
  newest.reset();

  std::vector<std::string> names;  // oldest first
  std::vector<std::string> left_out;
  for (const auto& [step, path] : list_checkpoint_files(env, model_dir, basename)) {
    if (step < latest_step) {
      names.push_back(relative(path));
    } else if (relative(path) != latest) {
      left_out.push_back(base_name(path));
    }
  }
  if (keep_checkpoint_max > 0 && names.size() >= static_cast<size_t>(keep_checkpoint_max)) {
    names.erase(names.begin(), names.end() - (keep_checkpoint_max - 1));
  }
  names.push_back(latest);
  if (!left_out.empty()) {
    LOG(WARNING) << "leaving " << join(left_out) << " in " << model_dir
                 << " out of its state file (missing or damaged): a save of the same step "
                 << "replaces each";
  }

  CheckpointState state;
  state.model_checkpoint_path = latest;
  for (const std::string& name : names) {
    double timestamp = 0;
    if (found.state) {
      const auto& paths = found.state->all_model_checkpoint_paths;
      const auto& times = found.state->all_model_checkpoint_timestamps;
      auto it = std::find(paths.begin(), paths.end(), name);
      if (it != paths.end() && static_cast<size_t>(it - paths.begin()) < times.size()) {
        timestamp = times[it - paths.begin()];
      }
    }
    if (timestamp == 0) {
      try {
        timestamp = env.modified_seconds(resolve_checkpoint_path(model_dir, name));
      } catch (const Error&) {
        timestamp = env.now_seconds();
      }
    }
    state.all_model_checkpoint_paths.push_back(name);
    state.all_model_checkpoint_timestamps.push_back(timestamp);
  }
  if (found.state) state.last_preserved_timestamp = found.state->last_preserved_timestamp;
  return state;
}

}  // namespace cadre::checkpoint
