// The exported-model directory that Estimator::export_model writes (under its
// export_dir_base, named by the time) and Predictor reads:
//   variables.h5   the model's variables, a checkpoint file (checkpoint/FORMAT.md)
//   export.json    ExportDescription (estimator/proto/export.proto): inputs, outputs and
//                  signatures (predict, classify, regress), with the step and checkpoint it came
//                  from
// Internal to the estimator module.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cadre/base/env.h"
#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/estimator/model_fn.h"
#include "cadre/io/element.h"
#include "cadre/tensor/tensor.h"

namespace cadre::estimator_internal {

inline constexpr char kExportVariablesFile[] = "variables.h5";
inline constexpr char kExportDescriptionFile[] = "export.json";
inline constexpr int kExportFormatVersion = 1;

struct TensorSpec {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // per example (no batch dimension)
};

struct ExportedModel {
  int64_t global_step = 0;
  std::string source_checkpoint;
  std::map<std::string, TensorSpec> inputs;
  std::map<std::string, TensorSpec> outputs;
  std::map<std::string, ExportOutput> signatures;
};

// A new export's directory under `export_dir_base`: <seconds since the epoch>, as
// TensorFlow names exports, or the next free number when an export of this second exists.
std::string new_export_dir(Env& env, const std::string& export_dir_base);

// The description of what `spec` (from model_fn in PREDICT on `features`) exports.
ExportedModel describe_export(const EstimatorSpec& spec, const io::Features& features,
                              const checkpoint::CheckpointReader& reader);
std::string export_description_json(const ExportedModel& model);
// Throws DataLossError naming `source` when `json` is not an export description.
ExportedModel parse_export_description(const std::string& json, const std::string& source);

}  // namespace cadre::estimator_internal
