// Exporters for EvalSpec (tf.estimator.LatestExporter and BestExporter): after an
// evaluation, export the model under model_dir/export/<name>/<seconds since the epoch>,
// keeping the newest exports_to_keep of them.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cadre/estimator/train_and_evaluate.h"

namespace cadre {

// Exports after every evaluation.
class LatestExporter : public Exporter {
 public:
  // serving_features: a batch of example inputs (see Estimator::export_model).
  LatestExporter(std::string name, io::Features serving_features, int exports_to_keep = 5);
  const std::string& name() const override { return name_; }
  std::string export_model(const Estimator& estimator, const std::string& checkpoint_path,
                           const EvalResult& eval_result, bool is_the_final_export) override;

 protected:
  std::string write_export(const Estimator& estimator, const std::string& checkpoint_path);

 private:
  std::string name_;
  io::Features serving_features_;
  int exports_to_keep_;
};

// Exports only when an evaluation is the best this exporter has seen by `metric` (lower is
// better unless higher_is_better).
class BestExporter : public LatestExporter {
 public:
  BestExporter(std::string name, io::Features serving_features, std::string metric = "loss",
               bool higher_is_better = false, int exports_to_keep = 5);
  std::string export_model(const Estimator& estimator, const std::string& checkpoint_path,
                           const EvalResult& eval_result, bool is_the_final_export) override;
  std::optional<double> best() const { return best_; }

 private:
  std::string metric_;
  bool higher_is_better_;
  std::optional<double> best_;
};

}  // namespace cadre
