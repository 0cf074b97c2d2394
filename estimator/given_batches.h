// What an elastic group's chief counts so that a worker that leaves the group and comes back
// reads on where the group left its input: the batches the group took from each worker. A
// worker's position is gathered at the chief's checkpoints; after it dies the group has still
// taken the batches it gave since, which the worker, restarted from a checkpoint, must not
// read again.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace cadre::estimator_internal {

class GivenBatches {
 public:
  // The run resumed from the checkpoint of `resume_step`: every worker's count starts at the
  // position that checkpoint holds for it.
  explicit GivenBatches(int64_t resume_step) { saved_.push_back({resume_step, {}}); }

  // Each of `workers` gave a batch to each of `steps` more steps.
  void given(const std::vector<int>& workers, int64_t steps);
  // `worker`'s position was gathered now: it holds every batch it gave.
  void gathered(int worker) { at_gather_[worker] = total(worker); }
  // The batches `worker` gave since its position was last gathered.
  int64_t behind(int worker) const;
  // The checkpoint of `step` holds each worker's position plus its batches behind: all it gave.
  void saved(int64_t step);
  // The batches a worker restored from the checkpoint of `restored_step` must skip to reach
  // what the group took from it; 0 for a checkpoint this run did not save or resume from.
  int64_t to_skip(int worker, int64_t restored_step) const;

 private:
  int64_t total(int worker) const;

  std::map<int, int64_t> total_;      // by worker, in this run
  std::map<int, int64_t> at_gather_;  // total_ when the worker's position was gathered
  // The totals each recent checkpoint holds, by its step (a worker not named: 0).
  std::deque<std::pair<int64_t, std::map<int, int64_t>>> saved_;
};

}  // namespace cadre::estimator_internal
