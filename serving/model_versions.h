// The versions of one model that a server holds: found by listing the export base's
// numbered subdirectories, chosen by the VersionPolicy, each loaded and checked before it
// is published, and published by replacing one map under a mutex, so that a request sees
// one version from start to end (it holds a shared_ptr to it) and an unloaded version goes
// when its last request ends.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cadre/base/mutex.h"
#include "cadre/estimator/predictor.h"
#include "cadre/serving/model_server.h"
#include "serving/rest_json.h"

namespace cadre::serving_internal {

class LoadedVersion {
 public:
  // Loads `path` and runs each signature once on zeros, so that a damaged or incompatible
  // version fails here rather than on a request. Throws what Predictor throws.
  LoadedVersion(int64_t version, std::string path, ModelFn model_fn, const Params& params);

  int64_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const TensorSpecs& inputs() const { return inputs_; }
  // The outputs of `signature`; InvalidArgumentError listing the signatures when unknown.
  const TensorSpecs& outputs(const std::string& signature) const;
  const std::map<std::string, TensorSpecs>& signatures() const { return outputs_; }
  // What `signature` is (predict, classify, regress); InvalidArgumentError when unknown.
  const ExportOutput& export_output(const std::string& signature) const;

  // Predictor::predict, one call at a time (a Predictor is not reentrant).
  std::map<std::string, Tensor> predict(const io::Features& inputs, const std::string& signature);

 private:
  int64_t version_;
  std::string path_;
  Mutex mutex_;
  std::unique_ptr<Predictor> predictor_ CADRE_PT_GUARDED_BY(mutex_);
  TensorSpecs inputs_;
  std::map<std::string, TensorSpecs> outputs_;
  std::map<std::string, ExportOutput> kinds_;
};

class ModelVersions {
 public:
  ModelVersions(std::string model_name, std::string export_base, VersionPolicy policy,
                ModelFn model_fn, Params params);

  // Lists the export base, loads the versions the policy selects that are not loaded yet
  // (refusing, with a log line, those that fail) and publishes the new set. Called by one
  // thread at a time.
  void poll();

  // The version asked for, or the highest one when none is; NotFoundError naming the model
  // (and version) when it is not served.
  std::shared_ptr<LoadedVersion> get(std::optional<int64_t> version) const;
  std::map<int64_t, std::shared_ptr<LoadedVersion>> all() const;
  const std::string& model_name() const { return model_name_; }

 private:
  std::shared_ptr<LoadedVersion> load(int64_t version, const std::string& path);

  const std::string model_name_;
  const std::string export_base_;
  const VersionPolicy policy_;
  const ModelFn model_fn_;
  const Params params_;
  std::map<int64_t, std::string> refused_;  // version -> why; only poll() touches it
  bool announced_waiting_ = false;          // likewise
  mutable Mutex mutex_;
  std::map<int64_t, std::shared_ptr<LoadedVersion>> versions_ CADRE_GUARDED_BY(mutex_);
};

}  // namespace cadre::serving_internal
