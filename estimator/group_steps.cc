// Training steps in an elastic group (group_steps.h), and TrainRun::adopt_most_advanced: a
// member that finished the step the others' failure interrupted holds every member's
// gradients of it; a worker that joins holds a checkpoint's state. Each member takes the state
// of the one that stepped furthest.
#include "estimator/group_steps.h"

#include <glog/logging.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

// StrategyExtended::rejoin, where the others' end of training sets `finished` (and counts
// as rejoined: there is nothing more to do).
bool rejoin(TrainRun& run, bool after_failure, bool& finished) {
  try {
    return run.strategy().extended().rejoin(after_failure);
  } catch (const OutOfRangeError& e) {
    LOG(WARNING) << "the other members finished training while this worker rejoined them ("
                 << e.what() << "): it ends at step " << run.global_step();
    finished = true;
    return true;
  }
}

// The members' state, taken again in a later generation when a member dies meanwhile.
void adopt_in_group(TrainRun& run, bool& finished, bool joining = false) {
  while (!finished) {
    try {
      run.adopt_most_advanced(joining);
      return;
    } catch (const std::exception& e) {
      if (!rejoin(run, /*after_failure=*/true, finished)) throw;
      LOG(WARNING) << "the worker group broke as its members took one state (" << e.what()
                   << "); its next generation takes it";
    }
  }
}

// The first line where two lists of variables (one "name shape dtype" a line) differ.
std::string first_difference(const std::string& theirs, const std::string& ours) {
  size_t at = 0;
  while (at < theirs.size() && at < ours.size() && theirs[at] == ours[at]) ++at;
  auto line = [at](const std::string& text) {
    size_t begin = text.rfind('\n', at == 0 ? 0 : at - 1);
    begin = begin == std::string::npos || at == 0 ? 0 : begin + 1;
    std::string out = text.substr(begin, text.find('\n', begin) - begin);
    return out.empty() ? std::string("nothing") : out;
  };
  return str_cat("theirs: ", line(theirs), "; this worker's: ", line(ours));
}

}  // namespace

GroupStep step_in_group(TrainRun& run, const PerReplica<io::Element>& batch, EstimatorSpec& spec) {
  const StrategyExtended& extended = run.strategy().extended();
  GroupStep out;
  while (!out.finished) {
    const int64_t before = run.global_step();
    // Whose batches the step takes (the chief counts them: TrainRun::count_batches_given).
    std::vector<int> members;
    try {
      if (!extended.group_changed() || !rejoin(run, /*after_failure=*/false, out.finished)) {
        if (run.counts_batches_given()) members = extended.workers_by_rank();
        out.result = run.step(batch, &spec);
        run.count_batches_given(members, run.global_step() - before);
        out.signals = run.take_step_signals();
        return out;
      }
    } catch (const std::exception& e) {
      if (!rejoin(run, /*after_failure=*/true, out.finished)) throw;
      LOG(WARNING) << "step " << before + 1 << " broke in the worker group (" << e.what()
                   << "); its next generation goes on";
    }
    adopt_in_group(run, out.finished);
    // A member that finished the broken step summed every member's batch of it.
    run.count_batches_given(members, run.global_step() - before);
    if (run.global_step() != before) return out;
  }
  return out;
}

std::optional<PerReplica<io::Element>> step_alone_then_join(TrainRun& run,
                                                            DistributedIterator& iterator,
                                                            EstimatorSpec& spec, bool& finished) {
  std::optional<PerReplica<io::Element>> batch = iterator.next();
  if (!batch) return batch;
  run.step(*batch, &spec);
  rejoin(run, /*after_failure=*/false, finished);
  adopt_in_group(run, finished, /*joining=*/true);
  if (finished) return std::nullopt;
  // The group took batches from this worker after its checkpoint's position (it died after
  // giving them): this one among them.
  if (int64_t skip = run.take_batches_to_skip(); skip > 0) {
    for (int64_t n = 0; n < skip && batch; ++n) batch = iterator.next();
    LOG(INFO) << "worker " << run.strategy().worker_index() << ": skipped the " << skip
              << " batch(es) of its input the group took before it came back";
  }
  return batch;
}

void TrainRun::adopt_most_advanced(bool joining) {
  const StrategyExtended& extended = strategy_->extended();
  std::vector<nn::Variable*> variables = variables_->primary().variables();
  std::sort(variables.begin(), variables.end(),
            [](const nn::Variable* a, const nn::Variable* b) { return a->name() < b->name(); });
  // Each member's step, then what it holds: the same model on every member, or no sync.
  std::string holds;
  for (const nn::Variable* v : variables) {
    holds +=
        str_cat(v->name(), " ", v->tensor().shape(), " ", dtype_name(v->tensor().dtype()), "\n");
  }
  // A joiner's step (one it took alone) is no member's: it offers none, and says which
  // checkpoint it restored.
  const int64_t offered = joining ? -1 : global_step_;
  std::vector<std::string> all =
      extended.all_gather_bytes(str_cat(offered, " ", resumed_step_, "\n", holds));
  std::vector<int> workers = extended.workers_by_rank();
  std::vector<int64_t> restored(all.size(), -1);  // by rank, of joiners
  int root = 0;
  int64_t furthest = -1;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t end = all[r].find('\n');
    std::istringstream line(all[r].substr(0, end));
    int64_t step = -1;
    line >> step;
    if (step < 0) line >> restored[r];
    if (std::string theirs = all[r].substr(end + 1); theirs != holds) {
      throw FailedPreconditionError(
          str_cat("worker ", workers[r], " holds other variables than worker ",
                  strategy_->worker_index(), " (", first_difference(theirs, holds),
                  "): the workers of an elastic group must run the same model_fn"));
    }
    if (step > furthest) {
      furthest = step;
      root = static_cast<int>(r);
    }
  }
  NoGradScope no_grad;
  for (nn::Variable* v : variables) {
    Tensor host = contiguous(to_device(v->tensor(), Device::cpu(0)));
    const bool in_place = host.shares_buffer_with(v->tensor());
    extended.broadcast_bytes(host.raw_data(), host.nbytes(), root);
    if (!in_place) v->assign(host);
  }
  LOG(INFO) << "the worker group's members took step " << furthest << " and the variables of "
            << "worker " << workers[root] << " (this worker was at step " << global_step_ << ")";
  global_step_ = furthest;
  tell_joiners_what_to_skip(restored, workers);
}

void TrainRun::tell_joiners_what_to_skip(const std::vector<int64_t>& restored,
                                         const std::vector<int>& workers) {
  if (std::all_of(restored.begin(), restored.end(), [](int64_t step) { return step < 0; })) {
    return;
  }
  // The chief (worker 0, always a member) counted what the group took from each worker.
  std::vector<int64_t> skip(restored.size(), 0);
  const auto chief = std::find(workers.begin(), workers.end(), 0) - workers.begin();
  if (manager_) {
    for (size_t r = 0; r < restored.size(); ++r) {
      if (restored[r] >= 0) skip[r] = given_.to_skip(workers[r], restored[r]);
    }
  }
  strategy_->extended().broadcast_bytes(skip.data(), skip.size() * sizeof(int64_t),
                                        static_cast<int>(chief));
  const auto me = std::find(workers.begin(), workers.end(), strategy_->worker_index());
  to_skip_ = skip[me - workers.begin()];
}

}  // namespace cadre::estimator_internal
