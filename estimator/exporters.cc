#include "cadre/estimator/exporters.h"

#include <glog/logging.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre {

LatestExporter::LatestExporter(std::string name, io::Features serving_features, int exports_to_keep)
    : name_(std::move(name)),
      serving_features_(std::move(serving_features)),
      exports_to_keep_(exports_to_keep) {
  if (name_.empty() || name_.find('/') != std::string::npos) {
    throw InvalidArgumentError(
        str_cat("exporter name '", name_, "' must be a non-empty file name"));
  }
  if (exports_to_keep_ < 0) {
    throw InvalidArgumentError(str_cat("exporter ", name_, ": exports_to_keep must be >= 0"));
  }
}

std::string LatestExporter::write_export(const Estimator& estimator,
                                         const std::string& checkpoint_path) {
  std::shared_ptr<Env> env = estimator.config().file_system();
  std::string base = join_path(join_path(estimator.model_dir(), "export"), name_);
  // Under base, named by the time in seconds, as TensorFlow names exports.
  std::string dir = estimator.export_model(base, serving_features_, checkpoint_path);
  if (exports_to_keep_ > 0) {
    std::vector<int64_t> stamps;
    for (const std::string& file : env->list_dir(base)) {
      if (!file.empty() && std::all_of(file.begin(), file.end(), ::isdigit)) {
        stamps.push_back(std::stoll(file));
      }
    }
    std::sort(stamps.begin(), stamps.end());
    for (size_t i = 0; i + exports_to_keep_ < stamps.size(); ++i) {
      std::string old = join_path(base, std::to_string(stamps[i]));
      try {
        env->remove_dir_recursively(old);
      } catch (const std::exception& error) {
        LOG(WARNING) << "exporter " << name_ << ": could not remove " << old << ": "
                     << error.what();
      }
    }
  }
  return dir;
}

std::string LatestExporter::export_model(const Estimator& estimator,
                                         const std::string& checkpoint_path,
                                         const EvalResult& eval_result, bool is_the_final_export) {
  return write_export(estimator, checkpoint_path);
}

BestExporter::BestExporter(std::string name, io::Features serving_features, std::string metric,
                           bool higher_is_better, int exports_to_keep)
    : LatestExporter(std::move(name), std::move(serving_features), exports_to_keep),
      metric_(std::move(metric)),
      higher_is_better_(higher_is_better) {}

std::string BestExporter::export_model(const Estimator& estimator,
                                       const std::string& checkpoint_path,
                                       const EvalResult& eval_result, bool is_the_final_export) {
  std::optional<double> found = eval_result.get(metric_);
  if (!found) {
    std::vector<std::string> names;
    for (const auto& [key, value] : eval_result) names.push_back(key);
    throw InvalidArgumentError(str_cat("BestExporter ", name(), ": the evaluation has no metric '",
                                       metric_, "'; it has: ", join(names)));
  }
  double value = *found;
  bool better = !best_ || (higher_is_better_ ? value > *best_ : value < *best_);
  if (!better) return "";
  best_ = value;
  LOG(INFO) << "exporter " << name() << ": new best " << metric_ << " = " << value;
  return write_export(estimator, checkpoint_path);
}

}  // namespace cadre
