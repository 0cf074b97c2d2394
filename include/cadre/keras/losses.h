// Losses for Model::compile, by object or by Keras name:
//
//   model.compile({.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
//   model.compile({.loss = SparseCategoricalCrossentropy({.from_logits = true})});
//
// As in Keras, the cross-entropies take probabilities unless from_logits; when the model
// ends in a softmax (or sigmoid) activation, they use its logits directly, which is the
// same loss computed stably.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre::keras {

// labels, the model's output, and the output's logits when its last activation is a
// softmax or sigmoid (else undefined) -> a scalar, the mean over the batch.
using LossFn =
    std::function<Tensor(const Tensor& labels, const Tensor& outputs, const Tensor& logits)>;

class Loss {
 public:
  // A custom loss; save() records its name, and load_model() leaves a model with a custom
  // loss uncompiled.
  Loss(std::string name, LossFn fn, std::map<std::string, double> config = {});
  // The loss of that Keras name ("sparse_categorical_crossentropy", "mse", ...); an unknown
  // name is an InvalidArgumentError listing the known ones.
  Loss(const char* name);         // NOLINT: implicit, as compile takes names
  Loss(const std::string& name);  // NOLINT
  const std::string& name() const { return name_; }
  const std::map<std::string, double>& config() const { return config_; }
  Tensor operator()(const Tensor& labels, const Tensor& outputs, const Tensor& logits) const;

 private:
  std::string name_;
  LossFn fn_;
  std::map<std::string, double> config_;
};

struct CrossentropyOptions {
  bool from_logits = false;
};
// Integer class ids [N] against scores [N, C].
class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(CrossentropyOptions options = {});
};
// One-hot labels [N, C] against scores [N, C].
class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(CrossentropyOptions options = {});
};
// Labels in [0, 1] against scores of the same shape.
class BinaryCrossentropy : public Loss {
 public:
  explicit BinaryCrossentropy(CrossentropyOptions options = {});
};
class MeanSquaredError : public Loss {
 public:
  MeanSquaredError();
};
class MeanAbsoluteError : public Loss {
 public:
  MeanAbsoluteError();
};
class Huber : public Loss {
 public:
  explicit Huber(double delta = 1.0);
};

namespace losses {
// The Keras names compile accepts.
std::vector<std::string> names();
// The loss recorded by save(): its name and config.
Loss from_config(const std::string& name, const std::map<std::string, double>& config);
}  // namespace losses

}  // namespace cadre::keras
