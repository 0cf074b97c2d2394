// The steps of a training run (Estimator::train), until a hook, the input, or a planned stop
// ends them.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include "cadre/estimator/hooks.h"
#include "cadre/estimator/run_config.h"
#include "cadre/strategies/distributed_dataset.h"
#include "cadre/strategies/strategy.h"
#include "core/runtime/thread_tuner.h"
#include "estimator/stop_notice.h"
#include "estimator/train_run.h"

namespace cadre::estimator_internal {

class TrainLoop {
 public:
  // `first_batch` gives the inputs of a step with no rows from the input's start, for a
  // worker whose input ended before it took a batch (no_rows()).
  TrainLoop(const RunConfig& config, TrainRun& run, DistributedIterator& iterator, Hooks& hooks,
            const Strategy& strategy, StopNotice& notice,
            std::function<std::optional<PerReplica<io::Element>>()> first_batch);

  // Whether the loop ended at the end of this worker's input.
  bool input_ended() const { return input_ended_; }

  void run();

 private:
  // Once this worker's input has ended, where workers step together: inputs with no rows,
  // so that it steps on beside the workers whose input goes on (their shards may be longer
  // after a resize, or a ps job's workers left them uneven; files may be unequal) until
  // every worker's has ended, as tf.distribute's get_next_as_optional does. Nullopt where
  // the loop ends here.
  std::optional<PerReplica<io::Element>> no_rows();
  // A planned stop the notice asks for: the end of the loop now when no other worker steps
  // with this one, else a signal that ends every worker's loop after the next step. True to
  // end the loop now.
  bool heed_notice();
  // From one step's end to the next's: waiting for input counts (a compute thread more can
  // starve the input pipeline's threads).
  void time_step();
  // A spec's hooks join when the first step has shown them.
  void add_spec_hooks(const EstimatorSpec& spec);

  const RunConfig& config_;
  TrainRun& run_;
  DistributedIterator& iterator_;
  Hooks& hooks_;
  const Strategy& strategy_;
  StopNotice& notice_;
  std::function<std::optional<PerReplica<io::Element>>()> first_batch_;
  std::optional<PerReplica<io::Element>> from_start_;  // what first_batch_ gave
  std::optional<ThreadTuner> tuner_;
  std::chrono::steady_clock::time_point last_step_end_;
  bool first_ = true;
  bool stop_raised_ = false;
  bool input_ended_ = false;
  bool told_no_rows_ = false;
};

}  // namespace cadre::estimator_internal
