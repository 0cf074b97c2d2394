#include "strategies/cluster/unit_dispatcher.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/base/mutex.h"
#include "core/base/strings.h"
#include "strategies/cluster/step_client.h"
#include "strategies/ps/ps_client.h"

namespace cadre {

struct UnitDispatcher::Shared {
  Mutex mutex;
  CondVar changed;
  std::deque<ps::WorkUnit> queue CADRE_GUARDED_BY(mutex);
  int64_t remaining CADRE_GUARDED_BY(mutex) = 0;  // units not complete
  bool stop CADRE_GUARDED_BY(mutex) = false;
  bool draining CADRE_GUARDED_BY(mutex) = false;  // stopped by stop(), not by the end or a failure
  int serving CADRE_GUARDED_BY(mutex) = 0;        // serve() loops not returned yet
  std::exception_ptr failure CADRE_GUARDED_BY(mutex);  // a worker's training error
  // Per worker: since when it has been lost (its calls failing), or nullopt.
  std::vector<std::optional<std::chrono::steady_clock::time_point>> lost_since
      CADRE_GUARDED_BY(mutex);
  std::vector<bool> input_ended CADRE_GUARDED_BY(mutex);  // per worker
  std::string last_loss CADRE_GUARDED_BY(mutex);
  DispatchReport report CADRE_GUARDED_BY(mutex);
};

UnitDispatcher::UnitDispatcher(const ClusterConfig& cluster, ps::PsClient& ps0, int64_t generation,
                               DispatchOptions options)
    : ps0_(ps0), generation_(generation), options_(options) {
  for (int i = 0; i < cluster.num_tasks("worker"); ++i) {
    TaskId task{"worker", i};
    if (!cluster.jobs.at("worker").count(i)) continue;  // a sparse cluster's gap
    tasks_.push_back(task);
    pipelines_.push_back(cluster.training_index(task) + 1);
    workers_.push_back(std::make_unique<StepClient>(task, cluster.address(task), cluster.security));
  }
  if (workers_.empty()) {
    throw InvalidArgumentError("the client has no workers to dispatch steps to");
  }
}

UnitDispatcher::~UnitDispatcher() = default;

DispatchReport UnitDispatcher::run(int64_t first_unit, int64_t steps, int64_t steps_per_unit,
                                   const std::function<void(const DispatchReport&)>& tick) {
  if (steps_per_unit <= 0) {
    throw InvalidArgumentError(str_cat("steps per unit must be positive, got ", steps_per_unit));
  }
  Shared shared;
  {
    MutexLock lock(shared.mutex);
    int64_t id = first_unit;
    for (int64_t left = steps; left > 0; left -= steps_per_unit) {
      shared.queue.push_back({generation_, id++, std::min(left, steps_per_unit)});
    }
    shared.remaining = static_cast<int64_t>(shared.queue.size());
    shared.lost_since.assign(workers_.size(), std::nullopt);
    shared.input_ended.assign(workers_.size(), false);
    shared.serving = static_cast<int>(workers_.size());
  }
  drain_seconds_.reset();
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers_.size(); ++w) {
    threads.emplace_back([this, w, &shared] {
      serve(w, shared);
      MutexLock lock(shared.mutex);
      --shared.serving;
      shared.changed.notify_all();
    });
  }
  std::exception_ptr failure;
  try {
    while (true) {
      DispatchReport so_far;
      {
        MutexLock lock(shared.mutex);
        shared.changed.wait_for(shared.mutex, std::chrono::milliseconds(200),
                                [&]()
                                    CADRE_REQUIRES(shared.mutex) { return shared.remaining == 0; });
        if (shared.remaining == 0 || shared.failure || shared.report.input_ended) break;
        check_not_all_lost(shared.lost_since, shared.input_ended, shared.last_loss);
        so_far = shared.report;
      }
      tick(so_far);
      if (drain_seconds_) break;
    }
  } catch (...) {
    failure = std::current_exception();
  }
  {
    MutexLock lock(shared.mutex);
    shared.stop = true;
    shared.draining = drain_seconds_ && !failure;
    shared.changed.notify_all();
  }
  if (drain_seconds_ && !failure) {
    bool drained;
    {
      MutexLock lock(shared.mutex);
      drained = shared.changed.wait_for(
          shared.mutex, std::chrono::duration<double>(*drain_seconds_),
          [&]() CADRE_REQUIRES(shared.mutex) { return shared.serving == 0; });
    }
    if (!drained) {
      LOG(WARNING) << "the units running did not finish within " << *drain_seconds_
                   << " s of the stop; abandoning them";
      for (const auto& worker : workers_) worker->cancel_units();
    }
  }
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  MutexLock lock(shared.mutex);
  if (shared.failure) std::rethrow_exception(shared.failure);
  shared.report.stopped = drain_seconds_.has_value() && shared.remaining > 0;
  return shared.report;
}

void UnitDispatcher::stop(double drain_seconds) { drain_seconds_ = std::max(0.0, drain_seconds); }

// One worker's dispatch loop: takes the next unit, runs it there, and on a failed call gives
// the unit back and waits retry_seconds before calling the worker again.
void UnitDispatcher::serve(size_t worker, Shared& shared) {
  StepClient& client = *workers_[worker];
  const std::string task = tasks_[worker].to_string();
  bool lost = false;
  while (true) {
    ps::WorkUnit unit;
    {
      MutexLock lock(shared.mutex);
      shared.changed.wait(shared.mutex, [&]() CADRE_REQUIRES(shared.mutex) {
        return shared.stop || !shared.queue.empty();
      });
      if (shared.stop) return;
      unit = shared.queue.front();
      shared.queue.pop_front();
      ++shared.report.dispatches;
    }
    try {
      steps::RunUnitResponse done = client.run_unit(unit, options_.unit_timeout_seconds);
      if (lost) LOG(INFO) << task << " is back: it runs units again";
      lost = false;
      MutexLock lock(shared.mutex);
      shared.lost_since[worker].reset();
      shared.report.steps_by_worker[task] += done.steps_applied();
      if (done.closed() || done.applied() >= unit.steps) {
        ++shared.report.units;
        --shared.remaining;
      } else {
        shared.queue.push_front(unit);  // not expected: the worker returns complete units
      }
      shared.changed.notify_all();
      continue;
    } catch (const WorkerTrainingError& e) {
      if (e.code() == ErrorCode::kUnavailable && ended_while_draining(task, unit, e, shared)) {
        return;
      }
      if (e.code() != ErrorCode::kUnavailable) {
        // Its training failed (not the worker, nor a ps task, which the client sees itself):
        // running the unit elsewhere would fail the same way. The run ends with this error.
        MutexLock lock(shared.mutex);
        if (!shared.failure) shared.failure = std::current_exception();
        shared.stop = true;
        shared.changed.notify_all();
        return;
      }
      if (give_back(worker, unit, e, lost, shared)) return;
      lost = true;
      if (wait_to_retry(shared)) return;
    } catch (const Error& e) {
      if (ended_while_draining(task, unit, e, shared)) return;
      // The worker is gone (or not up yet, or busy with a unit its previous client gave it),
      // or its input ended.
      if (give_back(worker, unit, e, lost, shared)) return;
      lost = true;
      if (wait_to_retry(shared)) return;
    }
  }
}

bool UnitDispatcher::ended_while_draining(const std::string& task, const ps::WorkUnit& unit,
                                          const Error& e, Shared& shared) {
  MutexLock lock(shared.mutex);
  if (!shared.draining) return false;
  // The run stops: the unit is not dispatched again (the steps it had applied stay counted).
  LOG(INFO) << task << ": unit " << unit.id << " ended as the dispatch stops: " << e.what();
  ++shared.report.abandoned;
  return true;
}

bool UnitDispatcher::give_back(size_t worker, const ps::WorkUnit& unit, const Error& e,
                               bool already_lost, Shared& shared) {
  const std::string task = tasks_[worker].to_string();
  // The unit goes back to the front of the queue for whichever worker is free.
  int64_t applied = -1;
  try {
    ps::UnitsRequest request;
    request.set_generation(generation_);
    request.add_units(unit.id);
    applied = ps0_.units(request).applied(0);
  } catch (const Error&) {
  }
  const std::string steps = str_cat(applied >= 0 ? std::to_string(applied) : std::string("?"),
                                    " of ", unit.steps, " steps applied, which stay counted");
  const bool ended = e.code() == ErrorCode::kOutOfRange || input_ended_on_ps0(worker);
  if (ended) {
    LOG(INFO) << task << "'s input has ended; its unit " << unit.id << " (" << steps
              << ") goes to a worker whose input lasts";
  } else if (!already_lost || applied > 0) {
    LOG(WARNING) << task << " lost unit " << unit.id << " (" << steps << "): " << e.what()
                 << "; the unit goes to the next free worker";
  }
  MutexLock lock(shared.mutex);
  shared.queue.push_front(unit);
  shared.changed.notify_all();
  if (ended) {
    shared.input_ended[worker] = true;
    shared.lost_since[worker].reset();
    if (std::all_of(shared.input_ended.begin(), shared.input_ended.end(),
                    [](bool e) { return e; })) {
      shared.report.input_ended = true;
      shared.stop = true;
    }
    return true;
  }
  ++shared.report.lost;
  if (!shared.lost_since[worker]) shared.lost_since[worker] = std::chrono::steady_clock::now();
  shared.last_loss = e.what();
  return false;
}

bool UnitDispatcher::input_ended_on_ps0(size_t worker) {
  try {
    ps::InputPositionsRequest request;
    request.set_pipeline(pipelines_[worker]);
    ps::InputPositionsResponse positions = ps0_.input_positions(request);
    return !positions.positions().empty() && positions.positions(0).ended();
  } catch (const Error&) {
    return false;  // ps 0 is the client's own concern
  }
}

void UnitDispatcher::check_not_all_lost(
    const std::vector<std::optional<std::chrono::steady_clock::time_point>>& lost_since,
    const std::vector<bool>& input_ended, const std::string& last_loss) const {
  std::chrono::steady_clock::time_point latest{};
  for (size_t w = 0; w < lost_since.size(); ++w) {
    if (input_ended[w]) continue;
    if (!lost_since[w]) return;  // this one answers
    latest = std::max(latest, *lost_since[w]);
  }
  double lost = std::chrono::duration<double>(std::chrono::steady_clock::now() - latest).count();
  if (lost > options_.all_lost_timeout_seconds) {
    throw UnavailableError(str_cat("every worker has been lost for ", static_cast<int64_t>(lost),
                                   " s; the last failure: ", last_loss));
  }
}

bool UnitDispatcher::wait_to_retry(Shared& shared) {
  MutexLock lock(shared.mutex);
  shared.changed.wait_for(shared.mutex, std::chrono::duration<double>(options_.retry_seconds),
                          [&]() CADRE_REQUIRES(shared.mutex) { return shared.stop; });
  return shared.stop;
}

void UnitDispatcher::finish_workers() {
  for (const auto& worker : workers_) {
    try {
      worker->finish(options_.finish_timeout_seconds);
    } catch (const Error& e) {
      LOG(INFO) << "not told that training is over (it reads the marker instead): " << e.what();
    }
  }
}

}  // namespace cadre
