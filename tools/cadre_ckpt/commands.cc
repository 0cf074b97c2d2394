#include "tools/cadre_ckpt/commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <set>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "checkpoint/model_dir_checkpoints.h"
#include "checkpoint/tf_bundle.h"
#include "core/base/strings.h"

namespace cadre::tools {
namespace {

using checkpoint::CheckpointReader;

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// A file as is; a model_dir's latest checkpoint that opens: the state file's, or when that
// is at fault (missing, empty, garbled, naming a file that is gone) or does not open, the
// newest file that does, each thing skipped said on `err`. Reads only.
std::unique_ptr<CheckpointReader> open_path(const std::string& path, std::ostream& err) {
  if (!is_directory(path)) return CheckpointReader::open(path);
  auto env = posix_env();
  checkpoint::ModelDirCheckpoints found = checkpoint::find_checkpoints(*env, path);
  if (!found.state_problem.empty()) {
    err << "warning: " << found.state_problem << "; using the newest checkpoint file\n";
  }
  for (const std::string& candidate : found.candidates) {
    try {
      return CheckpointReader::open(candidate);
    } catch (const Error& error) {
      if (error.code() != ErrorCode::kDataLoss && error.code() != ErrorCode::kNotFound) throw;
      err << "warning: skipping " << candidate << ": " << error.what() << "\n";
    }
  }
  throw NotFoundError(
      str_cat(path, " holds no checkpoint", found.candidates.empty() ? "" : " that opens"));
}

std::string describe(const checkpoint::VariableInfo& info) {
  return str_cat(info.dtype, " ", info.shape);
}

// Largest |a - b| over all elements (both read whole: a tool, not a hot path).
double max_abs_diff(const CheckpointReader& a, const CheckpointReader& b, const std::string& name) {
  Tensor x = a.read(name).cast(DType::kFloat64);
  Tensor y = b.read(name).cast(DType::kFloat64);
  const double* p = x.data<double>();
  const double* q = y.data<double>();
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = std::fabs(p[i] - q[i]);
    if (std::isnan(d)) {
      if (std::isnan(p[i]) != std::isnan(q[i])) return NAN;
      continue;
    }
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace

int ckpt_ls(const std::string& path, std::ostream& out, std::ostream& err) {
  std::unique_ptr<CheckpointReader> reader;
  try {
    reader = open_path(path, err);
  } catch (const Error& error) {
    err << "cadre_ckpt ls: " << error.what() << "\n";
    return 1;
  }
  out << "checkpoint " << reader->path() << "\n";
  out << "global_step " << reader->global_step() << "\n";
  size_t width = 0;
  for (const auto& [name, info] : reader->variables()) width = std::max(width, name.size());
  for (const auto& [name, info] : reader->variables()) {
    out << std::left << std::setw(static_cast<int>(width)) << name << "  " << std::setw(8)
        << info.dtype << " " << info.shape;
    if (!info.slot_of.empty()) out << "  (slot of " << info.slot_of << ")";
    if (!info.stored_name.empty()) out << "  (" << info.stored_name << " in the file)";
    out << "\n";
  }
  checkpoint::CheckpointSizes sizes = reader->sizes();
  uint64_t parts = sizes.variables + sizes.slots + sizes.input + sizes.rng;
  out << "bytes " << sizes.file << ": variables " << sizes.variables << ", slots " << sizes.slots
      << ", input state " << sizes.input << ", other "
      << (sizes.file > parts ? sizes.file - parts + sizes.rng : sizes.rng) << "\n";
  return 0;
}

int ckpt_diff(const std::string& a_path, const std::string& b_path, std::ostream& out,
              std::ostream& err) {
  std::unique_ptr<CheckpointReader> a, b;
  try {
    a = open_path(a_path, err);
    b = open_path(b_path, err);
  } catch (const Error& error) {
    err << "cadre_ckpt diff: " << error.what() << "\n";
    return 2;
  }
  std::set<std::string> names;
  for (const auto& [name, info] : a->variables()) names.insert(name);
  for (const auto& [name, info] : b->variables()) names.insert(name);
  int differences = 0;
  try {
    for (const std::string& name : names) {
      auto in_a = a->variables().find(name);
      auto in_b = b->variables().find(name);
      if (in_b == b->variables().end()) {
        out << "only in A: " << name << " " << describe(in_a->second) << "\n";
      } else if (in_a == a->variables().end()) {
        out << "only in B: " << name << " " << describe(in_b->second) << "\n";
      } else if (in_a->second.shape != in_b->second.shape ||
                 in_a->second.dtype != in_b->second.dtype) {
        out << "differs: " << name << " A " << describe(in_a->second) << ", B "
            << describe(in_b->second) << "\n";
      } else {
        double diff = max_abs_diff(*a, *b, name);
        if (diff == 0) continue;
        out << "differs: " << name << " max_abs_diff " << std::setprecision(6) << diff << "\n";
      }
      ++differences;
    }
  } catch (const Error& error) {
    err << "cadre_ckpt diff: " << error.what() << "\n";
    return 2;
  }
  if (a->global_step() != b->global_step()) {
    out << "global_step: A " << a->global_step() << ", B " << b->global_step() << "\n";
  }
  out << (differences == 0 ? "no variables differ" : str_cat(differences, " variables differ"))
      << "\n";
  return differences == 0 ? 0 : 1;
}

int ckpt_verify(const std::string& path, std::ostream& out, std::ostream& err) {
  std::vector<std::string> files;
  int damaged = 0;
  if (is_directory(path)) {
    auto env = posix_env();
    for (const auto& [step, file] : checkpoint::list_checkpoint_files(*env, path)) {
      files.push_back(file);
    }
    checkpoint::ModelDirCheckpoints named = checkpoint::find_checkpoints(*env, path);
    for (const std::string& candidate : named.candidates) {  // TensorFlow's, by prefix
      if (!env->file_exists(candidate) && checkpoint::checkpoint_exists(*env, candidate)) {
        files.push_back(candidate);
      }
    }
    if (files.empty()) {
      err << "cadre_ckpt verify: " << path << " holds no checkpoint\n";
      return 2;
    }
    // Readers get by without the state file (they use the files), but it is damage all the
    // same: the next CheckpointManager of the model_dir rewrites it.
    checkpoint::ModelDirCheckpoints found = checkpoint::find_checkpoints(*env, path);
    if (!found.state_problem.empty()) {
      ++damaged;
      out << "DAMAGED " << join_path(path, checkpoint::kStateFileName) << "\n  "
          << found.state_problem << "\n";
    }
  } else {
    if (!checkpoint::checkpoint_exists(*posix_env(), path)) {
      err << "cadre_ckpt verify: " << path << " does not exist\n";
      return 2;
    }
    files.push_back(path);
  }
  for (const std::string& file : files) {
    std::vector<checkpoint::DatasetProblem> problems;
    size_t datasets = 0;
    try {
      auto reader = CheckpointReader::open(file);
      problems = reader->verify();
      datasets = reader->variables().size();
    } catch (const Error& error) {
      problems.push_back({"(file)", error.what()});
    }
    if (problems.empty()) {
      out << "OK " << file << " (" << datasets << " variables and slots)\n";
      continue;
    }
    ++damaged;
    out << "DAMAGED " << file << "\n";
    for (const auto& problem : problems) {
      out << "  " << problem.dataset << ": " << problem.problem << "\n";
    }
  }
  return damaged == 0 ? 0 : 1;
}

int ckpt_convert(const std::string& source, const std::string& prefix, std::ostream& out,
                 std::ostream& err) {
  try {
    std::unique_ptr<CheckpointReader> reader = open_path(source, err);
    size_t tensors = checkpoint::internal::write_as_tf_bundle(*reader, *posix_env(), prefix);
    out << "wrote " << prefix << ".index and " << prefix << ".data-00000-of-00001: " << tensors
        << " tensors of " << reader->path() << " at global step " << reader->global_step() << "\n";
    return 0;
  } catch (const Error& error) {
    err << "cadre_ckpt convert: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace cadre::tools
