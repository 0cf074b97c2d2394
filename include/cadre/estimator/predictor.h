// Predictor: loads a directory written by Estimator::export_model and runs its prediction
// signatures with the same model_fn, without a model_dir or checkpoints.
//
//   auto predictor = Predictor::load("exports/1700000000", model_fn);
//   std::map<std::string, Tensor> out = predictor->predict({{"image", batch}});
//
// predict() may be called from one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cadre/estimator/model_fn.h"
#include "cadre/io/element.h"

namespace cadre {

class Predictor {
 public:
  // Throws NotFoundError when export_dir or one of its files is missing, DataLossError when
  // they are damaged.
  static std::unique_ptr<Predictor> load(const std::string& export_dir, ModelFn model_fn,
                                         Params params = {});
  ~Predictor();

  // The outputs of `signature` for a batch of inputs. Throws InvalidArgumentError naming
  // the input that is missing or has another dtype or per-example shape than exported, or
  // an unknown signature (listing the known ones).
  std::map<std::string, Tensor> predict(const io::Features& inputs,
                                        const std::string& signature = "serving_default");

  // The dtype and per-example shape (no batch dimension) of an input or output, as exported.
  struct TensorSpec {
    DType dtype = DType::kFloat32;
    std::vector<int64_t> shape;
  };
  // The inputs every signature takes (a model_fn sees all of them).
  std::map<std::string, TensorSpec> input_specs() const;
  // The outputs `signature` returns; InvalidArgumentError for an unknown signature.
  std::map<std::string, TensorSpec> output_specs(const std::string& signature) const;

  // What `signature` is (predict, classification or regression, and the keys it reads);
  // InvalidArgumentError for an unknown signature.
  const ExportOutput& export_output(const std::string& signature) const;

  std::vector<std::string> signatures() const;
  std::vector<std::string> input_names() const;
  int64_t global_step() const;

 private:
  struct Impl;
  explicit Predictor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cadre
