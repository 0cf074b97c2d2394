// MultiWorkerMirroredExtended's collectives across the workers: the step's gradient sums
// (in one buffer, or in buckets beside the backward pass), step signals, all-gathers, and an
// elastic group's next generation.
#include <glog/logging.h>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "strategies/cluster/membership.h"
#include "strategies/multi_worker_extended.h"
#include "strategies/sparse_rows.h"

namespace cadre {

void MultiWorkerMirroredExtended::cross_worker_sum(std::vector<Gradient>& values,
                                                   double& weight) const {
  if (std::string failure = group_->client->failure(); !failure.empty()) {
    throw AbortedError(str_cat("the cluster failed: ", failure));
  }
  NoGradScope no_grad;
  // One flat buffer for the dense gradients (sparse ones are gathered as rows), then the
  // weight and the step signal: one all-reduce per step, by NCCL on the GPU that holds the
  // worker's sum, else through host memory (shared memory or Gloo's ring). Float32 gradients travel
  // as float32 (half the bytes of doubles), anything else as float64. The sums are views of
  // the buffer: no copies out.
  ProcessCollective& across = gpus_ ? static_cast<ProcessCollective&>(*gpus_) : *group_->collective;
  const Device home = across.device();
  bool all_float = true;
  int64_t total = 2;
  std::vector<Tensor> dense(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined() || values[i].is_sparse()) continue;  // rows go by all-gather
    dense[i] = to_device(values[i].to_dense(), home);
    all_float &= dense[i].dtype() == DType::kFloat32;
    total += dense[i].numel();
  }
  DType dtype = all_float ? DType::kFloat32 : DType::kFloat64;
  Tensor flat = Tensor::empty(Shape{total}, dtype, home);
  int64_t at = 0;
  for (const Tensor& t : dense) {
    if (!t.defined()) continue;
    flat.slice(0, at, at + t.numel()).reshape(t.shape().to_vector()).assign(t);
    at += t.numel();
  }
  flat.slice(0, at, at + 2)
      .assign(Tensor::from_vector<double>({weight, encode_step_signals(signals_to_send())})
                  .cast(dtype));
  if (all_float) {
    across.sum(flat.data<float>(), static_cast<size_t>(total));
  } else {
    across.sum(flat.data<double>(), static_cast<size_t>(total));
  }
  at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].defined()) continue;
    if (values[i].is_sparse()) {
      values[i] = all_gather_rows(*this, values[i].sparse());
      continue;
    }
    Tensor summed = flat.slice(0, at, at + dense[i].numel()).reshape(dense[i].shape().to_vector());
    if (summed.dtype() != values[i].dtype()) summed = summed.cast(values[i].dtype());
    values[i] = to_device(summed, values[i].device());
    at += dense[i].numel();
  }
  weight = flat.slice(0, at, at + 1).item<double>();
  signal_heard_ |= decode_step_signals(flat.slice(0, at + 1, at + 2).item<double>());
  ++reductions_;
}

void MultiWorkerMirroredExtended::begin_gradients(const std::vector<Tensor>& sources, double weight,
                                                  const std::vector<double>& scalars) const {
  if (std::string failure = group_->client->failure(); !failure.empty()) {
    throw AbortedError(str_cat("the cluster failed: ", failure));
  }
  // The weight, the step signal and the scalars ride in the last bucket.
  std::vector<double> extras{weight, encode_step_signals(signals_to_send())};
  extras.insert(extras.end(), scalars.begin(), scalars.end());
  // Which gradients were sparse last step (the same on every worker: one model): they go
  // as rows. The first step sums every gradient dense.
  if (sparse_.size() != sources.size()) sparse_.assign(sources.size(), false);
  step_sparse_ = sparse_;
  buckets_->begin(sources, std::move(extras), step_sparse_, weight);
}

std::vector<Gradient> MultiWorkerMirroredExtended::finish_gradients(
    double& weight, std::vector<double>& scalars) const {
  std::vector<double> extras;
  std::vector<Gradient> sums = buckets_->finish(extras);
  for (size_t i = 0; i < sums.size(); ++i) {
    if (step_sparse_[i]) sums[i] = Gradient(rows_across_workers(sums[i], i));
  }
  weight = extras[0];
  signal_heard_ |= decode_step_signals(extras[1]);
  scalars.assign(extras.begin() + 2, extras.end());
  ++reductions_;
  return sums;
}

IndexedSlices MultiWorkerMirroredExtended::rows_across_workers(const Gradient& mine,
                                                               size_t source) const {
  if (mine.defined()) return all_gather_rows(*this, mine.sparse());
  // No rows here this step; the others may have some.
  const Shape& shape = sparse_shapes_.at(source);
  std::vector<int64_t> row = shape.to_vector();
  row[0] = 0;
  return all_gather_rows(*this, IndexedSlices{Tensor::empty(Shape{0}, DType::kInt64),
                                              Tensor::empty(Shape(row)), shape});
}

unsigned MultiWorkerMirroredExtended::take_step_signal() const {
  // A step done: an elastic group is elastic from its first (kGroupSteppedKey).
  if (group_->elastic && !stepped_.exchange(true) && group_->service) {
    group_->client->set(kGroupSteppedKey, "1");
  }
  unsigned raised = signals_to_send();
  signal_raised_ = 0;
  if (reductions_.exchange(0) == 0) {
    // No reduction carried them this step (nothing to train): one of their own, which every
    // worker makes alike.
    double value = encode_step_signals(raised);
    group_->collective->sum(&value, 1);
    return decode_step_signals(value);
  }
  return signal_heard_.exchange(0);
}

bool MultiWorkerMirroredExtended::rejoin(bool after_failure) const {
  if (!group_->elastic || (after_failure && !group_->collective_failed)) return false;
  // The others finished (also before this incarnation's first step: their input ended).
  if (after_failure) end_if_group_finished(*group_);
  // Before the first step the members are still making their variables together: a death
  // then fails the group, which restarts as one that is not elastic does.
  if (!group_->elastic->late && !stepped_) return false;
  if (group_->elastic->late) {
    join_running_group(*group_, timeout_seconds_);
    stepped_ = true;  // the group has
  } else {
    reform_worker_group(*group_, timeout_seconds_);
  }
  if (buckets_) buckets_ = std::make_unique<GradientBuckets>(*group_->collective, bucket_options_);
  signal_heard_ = 0;
  reductions_ = 0;
  return true;
}

std::vector<int> MultiWorkerMirroredExtended::workers_by_rank() const {
  if (!group_->elastic) return StrategyExtended::workers_by_rank();
  std::vector<int> workers;
  for (const std::string& member : group_->elastic->members) workers.push_back(worker_of(member));
  return workers;
}

std::vector<std::string> MultiWorkerMirroredExtended::all_gather_bytes(std::string bytes) const {
  ProcessCollective& collective = *group_->collective;
  std::vector<std::string> all(static_cast<size_t>(collective.size()));
  for (int r = 0; r < collective.size(); ++r) {
    uint64_t size = r == collective.rank() ? bytes.size() : 0;
    collective.broadcast(&size, sizeof size, r);
    all[r] = r == collective.rank() ? std::move(bytes) : std::string(size, '\0');
    if (size > 0) collective.broadcast(all[r].data(), size, r);
  }
  return all;
}
}  // namespace cadre
