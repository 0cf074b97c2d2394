#include "serving/model_versions.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

// The export base's numbered subdirectories, by version.
std::map<int64_t, std::string> list_versions(const std::string& base) {
  std::map<int64_t, std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(base, error)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 || !std::all_of(name.begin(), name.end(), ::isdigit)) {
      continue;
    }
    if (entry.is_directory(error)) found[std::stoll(name)] = entry.path().string();
  }
  return found;
}

}  // namespace

LoadedVersion::LoadedVersion(int64_t version, std::string path, ModelFn model_fn,
                             const Params& params)
    : version_(version), path_(std::move(path)) {
  predictor_ = Predictor::load(path_, std::move(model_fn), params);
  inputs_ = predictor_->input_specs();
  for (const std::string& signature : predictor_->signatures()) {
    outputs_[signature] = predictor_->output_specs(signature);
    kinds_[signature] = predictor_->export_output(signature);
    io::Features zeros;
    for (const auto& [name, spec] : inputs_) {
      std::vector<int64_t> dims{1};
      dims.insert(dims.end(), spec.shape.begin(), spec.shape.end());
      zeros.set(name, Tensor::zeros(Shape(dims), spec.dtype));
    }
    std::map<std::string, Tensor> out = predictor_->predict(zeros, signature);
    for (const auto& [name, spec] : outputs_[signature]) {
      if (!out.count(name) || out.at(name).rank() == 0 || out.at(name).dim(0) != 1) {
        throw InvalidArgumentError(
            str_cat("signature '", signature, "' output '", name, "' is not batched as exported"));
      }
    }
  }
}

const TensorSpecs& LoadedVersion::outputs(const std::string& signature) const {
  auto found = outputs_.find(signature);
  if (found == outputs_.end()) {
    std::vector<std::string> names;
    for (const auto& [name, specs] : outputs_) names.push_back(name);
    throw InvalidArgumentError(
        str_cat("no signature '", signature, "' in version ", version_, "; it has: ", join(names)));
  }
  return found->second;
}

const ExportOutput& LoadedVersion::export_output(const std::string& signature) const {
  outputs(signature);  // throws for an unknown signature, naming the known ones
  return kinds_.at(signature);
}

std::map<std::string, Tensor> LoadedVersion::predict(const io::Features& inputs,
                                                     const std::string& signature) {
  MutexLock lock(mutex_);
  return predictor_->predict(inputs, signature);
}

ModelVersions::ModelVersions(std::string model_name, std::string export_base, VersionPolicy policy,
                             ModelFn model_fn, Params params)
    : model_name_(std::move(model_name)),
      export_base_(std::move(export_base)),
      policy_(std::move(policy)),
      model_fn_(std::move(model_fn)),
      params_(std::move(params)) {}

std::shared_ptr<LoadedVersion> ModelVersions::load(int64_t version, const std::string& path) {
  try {
    auto loaded = std::make_shared<LoadedVersion>(version, path, model_fn_, params_);
    refused_.erase(version);
    LOG(INFO) << "model " << model_name_ << ": loaded version " << version << " from " << path;
    return loaded;
  } catch (const std::exception& error) {
    std::string& last = refused_[version];
    if (last != error.what()) {
      LOG(WARNING) << "model " << model_name_ << ": refusing version " << version << " at " << path
                   << " (the versions served keep serving): " << error.what();
      last = error.what();
    }
    return nullptr;
  }
}

void ModelVersions::poll() {
  std::map<int64_t, std::string> present = list_versions(export_base_);
  if (present.empty() && !announced_waiting_) {
    LOG(INFO) << "model " << model_name_ << ": waiting for a version under " << export_base_;
    announced_waiting_ = true;
  }
  std::map<int64_t, std::shared_ptr<LoadedVersion>> current = all();
  std::map<int64_t, std::shared_ptr<LoadedVersion>> next;
  for (auto it = present.rbegin(); it != present.rend(); ++it) {
    auto [version, path] = *it;
    if (policy_.kind == VersionPolicy::Kind::kLatest &&
        static_cast<int>(next.size()) >= policy_.num_latest) {
      break;
    }
    if (policy_.kind == VersionPolicy::Kind::kSpecific &&
        std::find(policy_.versions.begin(), policy_.versions.end(), version) ==
            policy_.versions.end()) {
      continue;
    }
    auto loaded = current.find(version);
    std::shared_ptr<LoadedVersion> entry =
        loaded != current.end() ? loaded->second : load(version, path);
    if (entry) next[version] = std::move(entry);
  }
  for (const auto& [version, entry] : current) {
    if (!next.count(version)) {
      LOG(INFO) << "model " << model_name_ << ": unloading version " << version;
    }
  }
  MutexLock lock(mutex_);
  versions_ = std::move(next);
}

std::shared_ptr<LoadedVersion> ModelVersions::get(std::optional<int64_t> version) const {
  MutexLock lock(mutex_);
  if (versions_.empty()) {
    throw NotFoundError(str_cat("no version of model '", model_name_, "' is loaded yet"));
  }
  if (!version) return versions_.rbegin()->second;
  auto found = versions_.find(*version);
  if (found == versions_.end()) {
    throw NotFoundError(
        str_cat("version ", *version, " of model '", model_name_, "' is not served"));
  }
  return found->second;
}

std::map<int64_t, std::shared_ptr<LoadedVersion>> ModelVersions::all() const {
  MutexLock lock(mutex_);
  return versions_;
}

}  // namespace cadre::serving_internal
