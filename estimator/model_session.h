// What every Estimator call (train, evaluate, predict, export, and a Predictor) runs model_fn
// against: a VariableStore whose variables are restored from a checkpoint as model_fn
// creates them, and the random generator of the run. Internal to the estimator module.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/variables.h"
#include "cadre/estimator/hooks.h"
#include "cadre/estimator/model_fn.h"
#include "cadre/io/element.h"
#include "cadre/nn/variable_store.h"
#include "cadre/random/generator.h"

namespace cadre::estimator_internal {

// The generator's name in checkpoints.
inline constexpr char kGlobalGenerator[] = "global";

// checkpoint::restoring_creator, and for a TensorFlow checkpoint a step counter
// ("<Optimizer>/iterations") it lacks starts at its global step: tf.estimator makes one
// optimizer's counter the global step (the DNN's of a wide & deep model) and saves none for it.
nn::VariableCreator checkpoint_creator(std::shared_ptr<const checkpoint::CheckpointReader> reader,
                                       checkpoint::CheckpointSourceFn source, bool verify);

class ModelSession {
 public:
  // Variables start from `restore_from` (names mapped by `source`) when given, else from
  // their initializers seeded with `seed`. The generator starts at (seed, stream 0), or at
  // the checkpoint's "global" generator state when restoring with same_names().
  ModelSession(uint64_t seed, std::shared_ptr<const checkpoint::CheckpointReader> restore_from,
               checkpoint::CheckpointSourceFn source, bool verify_reads);

  // model_fn on the calling thread with this session's store and generator current; the
  // spec is validated against `mode`.
  EstimatorSpec call(const ModelFn& model_fn, const io::Features& features, const Tensor& labels,
                     ModeKeys mode, const Params& params);

  nn::VariableStore& store() { return store_; }
  Generator& generator() { return generator_; }
  const checkpoint::CheckpointReader* checkpoint() const { return restore_from_.get(); }

 private:
  std::shared_ptr<const checkpoint::CheckpointReader> restore_from_;
  nn::VariableStore store_;
  Generator generator_;
};

// Examples in a batch: the first dimension of the labels, or of the first feature.
int64_t batch_size_of(const io::Features& features, const Tensor& labels);

// What one replica's model_fn produced in a step.
struct ReplicaOutput {
  EstimatorSpec spec;
  double loss = 0;
  int64_t batch_size = 0;
  bool applied = true;  // false: no worker of the job had examples for the step
};
// The step over all replicas, as hooks see it: the examples summed and the loss of the
// global batch (the replicas' losses weighted by their batch sizes). `spec` is not set.
StepResult combine_replicas(const std::vector<ReplicaOutput>& outputs, int64_t global_step);

// The checkpoint an evaluate/predict/export call reads: `path` when given, else the newest
// intact one of model_dir, which is chosen by verifying every checksum (`verified`), so that
// restoring from it need not check them again. Throws NotFoundError naming model_dir when
// there is none.
struct OpenedCheckpoint {
  std::shared_ptr<const checkpoint::CheckpointReader> reader;
  bool verified = false;
};
OpenedCheckpoint open_checkpoint_for(const std::string& model_dir, const std::string& path,
                                     std::string_view purpose);

}  // namespace cadre::estimator_internal
