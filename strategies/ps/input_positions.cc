#include "strategies/ps/input_positions.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {

namespace {

void check_pipeline(int pipeline, const std::string& task) {
  if (pipeline < 0 || pipeline > InputPositions::kMaxPipelines) {
    throw InvalidArgumentError(str_cat(task, ": input pipeline ", pipeline, "; expected 1 to ",
                                       InputPositions::kMaxPipelines, " (or 0: none)"));
  }
}

}  // namespace

void InputPositions::check(const PushRequest& request, const std::string& task) {
  check_pipeline(request.input_pipeline(), task);
  const int pipeline = request.input_pipeline();
  if (request.has_input_position() &&
      (pipeline == 0 || !request.increment_global_step() || request.step() != 0)) {
    throw InvalidArgumentError(str_cat(task,
                                       ": a push carries an input position but no input "
                                       "pipeline, or does not count the global step"));
  }
}

bool InputPositions::count(const PushRequest& request, int64_t global_step) {
  MutexLock lock(mutex_);
  Pipeline& pipeline = pipelines_[request.input_pipeline()];
  if (request.has_input_position()) {
    pipeline.before = std::move(pipeline.last);
    pipeline.last = Sent{pipeline.pushes, request.input_position()};
  }
  ++pipeline.pushes;
  pipeline.steps.push_back(global_step);
  if (pipeline.steps.size() > kRecentPushes) pipeline.steps.pop_front();
  return !pipeline.last || pipeline.pushes - pipeline.last->at >= kSendEvery;
}

int64_t InputPositions::pushes_by(const Pipeline& pipeline, int64_t step) {
  if (step <= 0) return pipeline.pushes;
  // A pipeline's pushes count increasing global steps.
  auto later = std::upper_bound(pipeline.steps.begin(), pipeline.steps.end(), step);
  return pipeline.pushes - (pipeline.steps.end() - later);
}

InputPositionsResponse InputPositions::list(const InputPositionsRequest& request) const {
  InputPositionsResponse response;
  MutexLock lock(mutex_);
  for (const auto& [index, pipeline] : pipelines_) {
    if (request.pipeline() != 0 && request.pipeline() != index) continue;
    const int64_t pushes = pushes_by(pipeline, request.at_step());
    const Sent* sent = nullptr;
    for (const std::optional<Sent>* candidate : {&pipeline.last, &pipeline.before}) {
      if (!sent && *candidate && (*candidate)->at <= pushes) sent = &**candidate;
    }
    if (!sent && !pipeline.ended) continue;
    InputPosition* out = response.add_positions();
    out->set_pipeline(index);
    out->set_pushes(pushes);
    out->set_ended(pipeline.ended);
    if (!sent) continue;
    out->set_state(sent->state);
    out->set_behind(pushes - sent->at);
  }
  return response;
}

void InputPositions::end(int pipeline, const std::string& task) {
  check_pipeline(pipeline, task);
  if (pipeline == 0) throw InvalidArgumentError(str_cat(task, ": the end of no input pipeline"));
  MutexLock lock(mutex_);
  pipelines_[pipeline].ended = true;
}

void InputPositions::clear() {
  MutexLock lock(mutex_);
  pipelines_.clear();
}

}  // namespace cadre::ps
