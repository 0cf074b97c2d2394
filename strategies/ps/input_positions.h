// What ps 0 keeps of the workers' input so that a parameter-server job reads every example
// once: per worker's input pipeline, the batches its pushes took and the positions it sent.
// Workers step on their own, so no moment holds every worker's position; each sends its
// position now and then (when a push's answer asks for it) with the push of the next batch,
// and ps 0 counts the batches pushed since. The chief's checkpoint of global step S holds
// each worker's position as of S and the batches it pushed after it by S, which its restore
// skips; a worker restarted while ps 0 runs on takes its position from here instead, since
// the variables kept what it pushed after the checkpoint.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "cadre/base/mutex.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

class InputPositions {
 public:
  // A worker's push carries its position at least this often: the most batches a restore
  // reads past once it restored a position.
  static constexpr int64_t kSendEvery = 32;
  // The global steps of each pipeline's last pushes kept, by which positions are given as of
  // a past step: well beyond the pushes of all workers between a checkpoint's step and its
  // save asking for them.
  static constexpr size_t kRecentPushes = 4096;
  // Pipelines are numbered from 1 (a worker's index + 1); more than this is a bad request.
  static constexpr int kMaxPipelines = 65536;

  // InvalidArgumentError naming `task` for a push whose pipeline is out of range, or that
  // carries a position without a pipeline or without counting the global step.
  static void check(const PushRequest& request, const std::string& task);
  // Counts the batch of a push that counted global step `global_step` (or was dropped as
  // too stale then: its batch was taken all the same), after recording the position it
  // carries as the one before it. Returns whether the worker is to send its position with
  // its next push.
  bool count(const PushRequest& request, int64_t global_step);
  // Every pipeline's, or the request's pipeline's, position as of the request's step and
  // the batches pushed after it by then, and whether its input ended; pipelines with neither
  // a position nor an end are left out.
  InputPositionsResponse list(const InputPositionsRequest& request) const;
  // Pipeline `pipeline`'s input has ended (InvalidArgumentError naming `task` for a pipeline
  // out of range): the chief, whose input may end first, waits for every worker's end.
  void end(int pipeline, const std::string& task);
  // A new chief, which restored a checkpoint's variables and input positions: the counts
  // start again.
  void clear();

 private:
  struct Sent {
    int64_t at = 0;  // the pipeline's pushes before the position's
    std::string state;
  };
  struct Pipeline {
    int64_t pushes = 0;
    std::deque<int64_t> steps;  // the global step of each of the last kRecentPushes pushes
    // The last two positions sent: a checkpoint's step may come before the last.
    std::optional<Sent> last, before;
    bool ended = false;
  };
  // The pushes of `pipeline` that counted `step` or an earlier one (0: all of them).
  static int64_t pushes_by(const Pipeline& pipeline, int64_t step);

  mutable Mutex mutex_;
  std::map<int, Pipeline> pipelines_ CADRE_GUARDED_BY(mutex_);
};

}  // namespace cadre::ps
