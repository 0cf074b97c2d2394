#include "estimator/model_session.h"

#include <algorithm>
#include <filesystem>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/restore.h"
#include "cadre/checkpoint/state_file.h"
#include "core/base/strings.h"

namespace cadre::estimator_internal {

namespace {

nn::VariableCreator creator_for(const std::shared_ptr<const checkpoint::CheckpointReader>& reader,
                                checkpoint::CheckpointSourceFn source, bool verify) {
  if (!reader) return nn::default_variable_creator;
  return checkpoint_creator(reader, std::move(source), verify);
}

}  // namespace

nn::VariableCreator checkpoint_creator(std::shared_ptr<const checkpoint::CheckpointReader> reader,
                                       checkpoint::CheckpointSourceFn source, bool verify) {
  nn::VariableCreator restoring = checkpoint::restoring_creator(reader, source, verify);
  // A TensorFlow bundle is a prefix beside PREFIX.index.
  std::error_code error;
  if (!std::filesystem::exists(reader->path() + ".index", error)) return restoring;
  return [reader, restoring, source](const nn::VariableSpec& spec,
                                     uint64_t seed) -> std::shared_ptr<nn::Variable> {
    std::optional<std::string> from = source(spec);
    if (!from || !from->ends_with("/iterations") || reader->variables().count(*from) != 0) {
      return restoring(spec, seed);
    }
    std::shared_ptr<nn::Variable> counter = nn::default_variable_creator(spec, seed);
    counter->tensor().assign(Tensor::full(Shape{}, static_cast<double>(reader->global_step()),
                                          spec.dtype, counter->tensor().device()));
    return counter;
  };
}

ModelSession::ModelSession(uint64_t seed,
                           std::shared_ptr<const checkpoint::CheckpointReader> restore_from,
                           checkpoint::CheckpointSourceFn source, bool verify_reads)
    : restore_from_(restore_from),
      store_(seed, creator_for(restore_from, std::move(source), verify_reads)),
      generator_(seed, 0) {
  if (restore_from_) {
    auto states = restore_from_->rng_states(verify_reads);
    if (auto it = states.find(kGlobalGenerator); it != states.end()) {
      generator_.set_state(it->second);
    }
  }
}

EstimatorSpec ModelSession::call(const ModelFn& model_fn, const io::Features& features,
                                 const Tensor& labels, ModeKeys mode, const Params& params) {
  nn::VariableStoreScope store_scope(store_);
  GeneratorScope generator_scope(generator_);
  EstimatorSpec spec = model_fn(features, labels, mode, params);
  spec.validate(mode);
  return spec;
}

int64_t batch_size_of(const io::Features& features, const Tensor& labels) {
  if (labels.defined() && labels.rank() > 0) return labels.dim(0);
  for (const auto& [name, value] : features) {
    if (value.rank() > 0) return value.dim(0);
  }
  return 1;
}

StepResult combine_replicas(const std::vector<ReplicaOutput>& outputs, int64_t global_step) {
  StepResult result;
  result.global_step = global_step;
  double weighted = 0;
  for (const ReplicaOutput& r : outputs) {
    weighted += r.loss * static_cast<double>(r.batch_size);
    result.batch_size += r.batch_size;
  }
  // A worker whose input has ended steps with no rows; its replicas hold the job's loss.
  result.loss = result.batch_size > 0 ? weighted / static_cast<double>(result.batch_size)
                                      : outputs.front().loss;
  return result;
}

OpenedCheckpoint open_checkpoint_for(const std::string& model_dir, const std::string& path,
                                     std::string_view purpose) {
  if (!path.empty()) return {checkpoint::CheckpointReader::open(path), false};
  if (model_dir.empty()) {
    throw InvalidArgumentError(
        str_cat("cannot ", purpose, ": RunConfig.model_dir is empty and no checkpoint_path given"));
  }
  std::shared_ptr<const checkpoint::CheckpointReader> reader =
      checkpoint::open_latest_intact(model_dir);
  if (!reader) {
    throw NotFoundError(str_cat("cannot ", purpose, ": no checkpoint in model_dir ", model_dir,
                                " (train first, or pass a checkpoint_path)"));
  }
  return {std::move(reader), true};
}

}  // namespace cadre::estimator_internal
