// TrainRun's step under RunConfig.deterministic: model_fn runs on each input shard's rows in
// turn, with a random stream of the shard and the step, and the shards' gradient sums are
// added along one tree over the shards on every worker (ReplicaContext::
// apply_shard_gradients). A shard's rows give the same bits on whichever worker reads them,
// so the trajectory is the same for 1, 2 or 4 workers, and across a resize.
#include "cadre/autodiff/tape.h"
#include "cadre/ops/math.h"
#include "cadre/random/generator.h"
#include "core/base/strings.h"
#include "estimator/train_run.h"
#include "io/virtual_shards.h"

namespace cadre::estimator_internal {

ReplicaOutput TrainRun::shard_ordered_step(ReplicaContext& ctx, const io::Element& batch) {
  std::vector<int64_t> rows = batch.features.at(io::kShardRowsFeature).to_vector<int64_t>();
  io::Features features = batch.features;
  features.erase(io::kShardRowsFeature);
  ReplicaOutput out;
  std::vector<std::vector<Gradient>> parts;
  std::vector<std::vector<double>> scalar_sums;
  std::vector<nn::Variable*> variables;
  const uint64_t seed = current_generator().seed();
  int64_t at = 0;
  for (size_t p = 0; p < rows.size(); ++p) {
    const int64_t n = rows[p], shard = *ordered_first_shard_ + static_cast<int64_t>(p);
    io::Features part;
    for (const auto& [name, value] : features) part.set(name, value.slice(0, at, at + n));
    Tensor labels = batch.labels.defined() ? batch.labels.slice(0, at, at + n) : Tensor();
    at += n;
    Generator generator(seed,
                        stream_for_name(str_cat("input_shard ", shard, " step ", global_step_)));
    GeneratorScope generator_scope(generator);
    GradientTape tape;
    EstimatorSpec spec = estimator_.model_fn()(part, labels, ModeKeys::kTrain, estimator_.params());
    spec.validate(ModeKeys::kTrain);
    if (variables.empty()) variables = chosen_variables(ctx.store(), spec.train_op);
    std::vector<Tensor> sources;
    for (nn::Variable* v : variables) sources.push_back(v->tensor());
    parts.push_back(tape.gradient(spec.loss * static_cast<double>(n), sources));
    std::vector<double> sums{spec.loss.item<double>() * static_cast<double>(n)};
    for (const auto& [tag, value] : spec.scalar_summaries) {
      sums.push_back(value.item<double>() * static_cast<double>(n));
    }
    scalar_sums.push_back(std::move(sums));
    out.spec = std::move(spec);  // the last shard's: its optimizer and summary tags
  }
  out.batch_size = at;
  std::vector<double> means(scalar_sums.at(0).size());
  ctx.apply_shard_gradients(*out.spec.train_op.optimizer, *ordered_first_shard_, ordered_shards_,
                            std::move(parts), rows, scalar_sums, variables, &means);
  out.loss = means[0];
  size_t i = 1;
  for (auto& [tag, value] : out.spec.scalar_summaries) value = Tensor::scalar(means[i++]);
  return out;
}

}  // namespace cadre::estimator_internal
