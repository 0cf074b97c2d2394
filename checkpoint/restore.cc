#include "cadre/checkpoint/restore.h"

#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <regex>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "core/base/strings.h"

namespace cadre::checkpoint {
namespace {

// Problems found while planning a restore, reported together.
struct Problems {
  std::vector<std::string> missing, unexpected, mismatched;

  bool empty() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }

  [[noreturn]] void raise(const std::string& path, std::string_view what) const {
    std::vector<std::string> parts;
    if (!missing.empty()) {
      parts.push_back(
          str_cat(missing.size(), " missing from the checkpoint (", join(missing), ")"));
    }
    if (!unexpected.empty()) {
      parts.push_back(str_cat(unexpected.size(), " in the checkpoint but not in the model (",
                              join(unexpected), ")"));
    }
    if (!mismatched.empty()) {
      parts.push_back(str_cat(mismatched.size(), " that disagree (", join(mismatched, "; "), ")"));
    }
    throw InvalidArgumentError(
        str_cat("cannot ", what, " from checkpoint ", path,
                ", which looks like a checkpoint of another model: ", join(parts, "; ")));
  }
};

// Checks one target against the stored variable; adds a mismatch when they disagree.
void check_target(const std::string& name, const VariableInfo& info, const RestoreTarget& target,
                  Problems* problems) {
  const Tensor& tensor = target.tensor;
  if (!tensor.defined()) {
    problems->mismatched.push_back(str_cat(name, ": the target tensor is undefined"));
    return;
  }
  if (tensor.dtype() != info.dtype) {
    problems->mismatched.push_back(
        str_cat(name, ": checkpoint ", info.dtype, ", model ", tensor.dtype()));
    return;
  }
  if (!target.partition) {
    if (tensor.shape() != info.shape) {
      problems->mismatched.push_back(
          str_cat(name, ": checkpoint ", info.shape, ", model ", tensor.shape()));
    }
    return;
  }
  const Shape& shape = info.shape;
  if (shape.rank() == 0 || tensor.rank() != shape.rank() ||
      tensor.shape().without_dim(0) != shape.without_dim(0) || target.first_row < 0 ||
      target.first_row + tensor.dim(0) > shape[0]) {
    problems->mismatched.push_back(str_cat(name, ": checkpoint ", shape, ", model partition ",
                                           tensor.shape(), " at row ", target.first_row));
  }
}

// In a strict restore the partitions of a variable must cover each row exactly once.
void check_coverage(const std::string& name, const VariableInfo& info,
                    const std::vector<RestoreTarget>& targets, Problems* problems) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const RestoreTarget& target : targets) {
    if (!target.partition) return;
    ranges.emplace_back(target.first_row, target.first_row + target.tensor.dim(0));
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t next = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != next) break;
    next = end;
  }
  if (next != info.shape[0]) {
    problems->mismatched.push_back(
        str_cat(name, ": the partitions do not cover rows [0, ", info.shape[0], ") exactly once"));
  }
}

bool is_missing_or_damaged(const Error& error) {
  return error.code() == ErrorCode::kDataLoss || error.code() == ErrorCode::kNotFound;
}

}  // namespace

RestoreTargets whole_targets(const std::map<std::string, Tensor>& tensors) {
  RestoreTargets targets;
  for (const auto& [name, tensor] : tensors) targets[name].push_back(RestoreTarget::whole(tensor));
  return targets;
}

std::vector<std::string> restore(const CheckpointReader& reader, const RestoreTargets& targets,
                                 const RestoreOptions& options) {
  const auto& stored = reader.variables();
  Problems problems;
  std::vector<std::string> skipped;
  for (const auto& [name, list] : targets) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      (options.strict ? problems.missing : skipped).push_back(name);
      continue;
    }
    if (list.empty()) {
      problems.mismatched.push_back(str_cat(name, ": no target tensor"));
      continue;
    }
    size_t before = problems.mismatched.size();
    for (const RestoreTarget& target : list) check_target(name, it->second, target, &problems);
    bool partitioned = list.front().partition;
    for (const RestoreTarget& target : list) {
      if (target.partition != partitioned || (!partitioned && list.size() > 1)) {
        problems.mismatched.push_back(
            str_cat(name, ": mixes whole and partitioned targets, or has several whole ones"));
        break;
      }
    }
    if (options.strict && partitioned && problems.mismatched.size() == before) {
      check_coverage(name, it->second, list, &problems);
    }
  }
  for (const auto& [name, info] : stored) {
    if (!targets.count(name)) (options.strict ? problems.unexpected : skipped).push_back(name);
  }
  if (!problems.empty()) problems.raise(reader.path(), "restore");
  if (!skipped.empty()) {
    LOG(WARNING) << "restoring from " << reader.path() << " skips " << skipped.size()
                 << " variables present on one side only: " << join(skipped);
  }

  std::vector<std::string> restored;
  for (const auto& [name, list] : targets) {
    if (!stored.count(name)) continue;
    if (list.front().partition) {
      std::vector<std::pair<int64_t, Tensor>> partitions;
      for (const RestoreTarget& target : list)
        partitions.emplace_back(target.first_row, target.tensor);
      reader.read_partitions_into(name, partitions, options.verify_checksums);
    } else {
      reader.read_into(name, list.front().tensor, options.verify_checksums);
    }
    restored.push_back(name);
  }
  return restored;
}

std::vector<std::string> warm_start(const CheckpointReader& reader,
                                    const std::map<std::string, Tensor>& targets,
                                    const std::map<std::string, std::string>& slot_of,
                                    const WarmStartOptions& options) {
  std::regex pattern;
  try {
    pattern = std::regex(options.vars_to_warm_start, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    throw InvalidArgumentError(str_cat("warm start: vars_to_warm_start '",
                                       options.vars_to_warm_start,
                                       "' is not a regular expression: ", error.what()));
  }
  auto previous_name = [&](const std::string& name) {
    auto it = options.var_name_to_prev_var_name.find(name);
    return it == options.var_name_to_prev_var_name.end() ? name : it->second;
  };
  // Target name -> name in the checkpoint.
  std::map<std::string, std::string> plan;
  for (const auto& [name, tensor] : targets) {
    if (!slot_of.count(name) && std::regex_match(name, pattern)) plan[name] = previous_name(name);
  }
  if (options.include_slots) {
    for (const auto& [slot, variable] : slot_of) {
      auto chosen = plan.find(variable);
      if (chosen == plan.end() || !targets.count(slot)) continue;
      std::string suffix = slot.starts_with(variable) ? slot.substr(variable.size()) : "/" + slot;
      plan[slot] = chosen->second + suffix;
    }
  }
  Problems problems;
  for (const auto& [name, previous] : plan) {
    auto it = reader.variables().find(previous);
    if (it == reader.variables().end()) {
      problems.missing.push_back(previous == name ? name : str_cat(name, " (as ", previous, ")"));
      continue;
    }
    check_target(name, it->second, RestoreTarget::whole(targets.at(name)), &problems);
  }
  if (!problems.empty()) problems.raise(reader.path(), "warm-start");
  std::vector<std::string> written;
  for (const auto& [name, previous] : plan) {
    reader.read_into(previous, targets.at(name), options.verify_checksums);
    written.push_back(name);
  }
  LOG(INFO) << "warm-started " << written.size() << " variables from " << reader.path();
  return written;
}

namespace {

// The first of model_dir's checkpoints, in find_checkpoints' order, that opens and passes
// `use` (a damaged state file, and missing or damaged checkpoints, are skipped with a
// warning).
std::unique_ptr<CheckpointReader> first_good(
    const std::string& model_dir, Env* env, const std::string& basename,
    const std::function<void(const CheckpointReader&)>& use) {
  std::shared_ptr<Env> owned;
  if (env == nullptr) {
    owned = posix_env();
    env = owned.get();
  }
  ModelDirCheckpoints found = find_checkpoints(*env, model_dir, basename);
  const std::vector<std::string>& candidates = found.candidates;
  if (!found.state_problem.empty()) {
    LOG(WARNING) << found.state_problem << "; "
                 << (candidates.empty() ? "model_dir holds no checkpoint file either"
                                        : str_cat("trying the checkpoint files in ", model_dir,
                                                  ", the newest first"));
  }
  std::vector<std::string> failures;
  for (const std::string& path : candidates) {
    try {
      std::unique_ptr<CheckpointReader> reader = CheckpointReader::open(path);
      use(*reader);
      if (!failures.empty()) {
        LOG(WARNING) << "using the older checkpoint " << path << " because newer ones are "
                     << "missing or damaged";
      }
      return reader;
    } catch (const Error& error) {
      if (!is_missing_or_damaged(error)) throw;
      LOG(WARNING) << "cannot use " << path << ": " << error.what()
                   << (&path != &candidates.back() ? "; trying the previous checkpoint" : "");
      failures.push_back(error.what());
    }
  }
  if (!failures.empty()) {
    throw DataLossError(str_cat("no intact checkpoint in ", model_dir, ": ", join(failures, "; ")));
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<CheckpointReader> restore_latest_good(const std::string& model_dir,
                                                      const RestoreTargets& targets,
                                                      const RestoreOptions& options, Env* env,
                                                      const std::string& basename) {
  return first_good(model_dir, env, basename,
                    [&](const CheckpointReader& reader) { restore(reader, targets, options); });
}

std::unique_ptr<CheckpointReader> open_latest_intact(const std::string& model_dir, Env* env,
                                                     const std::string& basename) {
  return first_good(model_dir, env, basename, [](const CheckpointReader& reader) {
    std::vector<DatasetProblem> problems = reader.verify();
    if (problems.empty()) return;
    std::vector<std::string> lines;
    for (const DatasetProblem& p : problems) lines.push_back(str_cat(p.dataset, ": ", p.problem));
    throw DataLossError(str_cat("checkpoint ", reader.path(), " is damaged: ", join(lines, "; ")));
  });
}

}  // namespace cadre::checkpoint
