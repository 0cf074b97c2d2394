// TrainRun::adopt_most_advanced: how the members of an elastic group's new generation
// (strategies/cluster/elastic_group.h) step together again. A member that finished the step
// the others' failure interrupted holds every member's gradients of it; a worker that joins
// holds a checkpoint's state. Each takes the state of the one that stepped furthest.
#include <glog/logging.h>

#include <algorithm>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "estimator/train_run.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {

void TrainRun::adopt_most_advanced() {
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
  std::vector<std::string> all = extended.all_gather_bytes(str_cat(global_step_, "\n", holds));
  std::vector<int> workers = extended.workers_by_rank();
  int root = 0;
  int64_t furthest = -1;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t end = all[r].find('\n');
    int64_t step = std::stoll(all[r].substr(0, end));
    if (all[r].substr(end + 1) != holds) {
      throw FailedPreconditionError(str_cat(
          "worker ", workers[r], " holds other variables than worker ", strategy_->worker_index(),
          ": the workers of an elastic group must run the "
          "same model_fn"));
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
}

}  // namespace cadre::estimator_internal
