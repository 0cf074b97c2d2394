#include "strategies/cluster/worker_group.h"

#include <glog/logging.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "strategies/cluster/elastic_group.h"
#include "strategies/cluster/membership.h"
#include "strategies/cluster/memory_store.h"
#include "strategies/collectives/host_collective.h"

namespace cadre {
namespace {

// The group's collective, which notes when an operation throws. The processes of a group
// call every operation together, so after one has failed (a peer is gone, or timed out)
// they are out of step for good, and a dead peer never reaches the shutdown barrier.
class FailureNotingCollective final : public ProcessCollective {
 public:
  FailureNotingCollective(std::unique_ptr<ProcessCollective> inner, std::atomic<bool>* failed,
                          CoordinationClient* client)
      : inner_(std::move(inner)), failed_(failed), client_(client) {}

  // An elastic group between generations has no inner collective: rank -1 of none.
  int rank() const override { return inner_ ? inner_->rank() : -1; }
  int size() const override { return inner_ ? inner_->size() : 0; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return inner_ ? inner_->transport() : "none"; }
  void sum(float* data, size_t count) override {
    noting([&] { inner_->sum(data, count); });
  }
  void sum(double* data, size_t count) override {
    noting([&] { inner_->sum(data, count); });
  }
  void broadcast(void* data, size_t bytes, int root) override {
    noting([&] { inner_->broadcast(data, bytes, root); });
  }
  // An elastic group's next generation (null: none until the next call).
  void replace(std::unique_ptr<ProcessCollective> inner) {
    inner_ = std::move(inner);
    left_.store(false, std::memory_order_relaxed);
  }
  // After this, the group's operations throw here instead of reaching the transport.
  void leave() override {
    left_.store(true, std::memory_order_relaxed);
    failed_->store(true, std::memory_order_relaxed);
    if (inner_) inner_->leave();
  }

 private:
  template <typename F>
  void noting(F&& operation) {
    if (left_.load(std::memory_order_relaxed)) {
      throw AbortedError(
          "this task left its worker group after an error; restart the task to train again");
    }
    if (!inner_) throw AbortedError("the worker group is between generations");
    try {
      operation();
    } catch (const std::exception& error) {
      failed_->store(true, std::memory_order_relaxed);
      // A peer that failed by itself reported its error before it left: say what it was.
      std::string why = client_->failure_now(/*timeout_seconds=*/1);
      if (why.empty() || std::string_view(error.what()).find(why) != std::string_view::npos) {
        throw;  // nothing to add (a transport that polls the service may have said it)
      }
      throw AbortedError(str_cat(error.what(), "; the coordination service: ", why));
    } catch (...) {
      failed_->store(true, std::memory_order_relaxed);
      throw;
    }
  }

  std::unique_ptr<ProcessCollective> inner_;
  std::atomic<bool>* failed_;
  CoordinationClient* client_;
  std::atomic<bool> left_{false};
};

// The group of a cluster with one training task: nobody to register with, wait for or send
// gradients to, so no coordination service, no port and no job secret (a one-task cluster
// reads none: RunConfig::from_environment). Keys stay in this process, for NCCL's id.
class SoleTaskClient final : public CoordinationClient {
 public:
  void set(const std::string& key, const std::string& value) override { store_.set(key, value); }
  std::string get(const std::string& key, double timeout_seconds) override {
    return store_.get(key, timeout_seconds);
  }
  void wait(const std::vector<std::string>& keys, double timeout_seconds) override {
    store_.wait(keys, timeout_seconds);
  }
  void register_task(double) override {}
  void barrier(const std::string&, double) override {}
  void stop_heartbeats() override {}
  bool planned_stop_requested() const override { return false; }
  std::string failure() const override { return ""; }  // a task's own error is its own
  std::string failure_now(double) override { return ""; }
  void report_error(const std::string&, double) override {}

 private:
  MemoryStore store_;
};

// The one process of such a group: sums and broadcasts over itself leave the data as it is.
class SoleTaskCollective final : public ProcessCollective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "identity (one worker)"; }
  void sum(float*, size_t) override {}
  void sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
};

}  // namespace

WorkerGroup::WorkerGroup() = default;

WorkerGroup::~WorkerGroup() {
  if (!client) return;
  // The job is over for every process when a collective failed (a peer may be dead: it
  // would hold this one at the barrier until the heartbeat timeout) or when this one is
  // leaving on an exception (the others wait for it in a collective, not at the barrier).
  // Leaving the collective first ends the others' collectives at once (stopping the service
  // may wait for their calls to it).
  const bool failed = collective_failed.load(std::memory_order_relaxed);
  const bool leaving = failed || std::uncaught_exceptions() > 0;
  if (leaving) {
    LOG(WARNING) << (failed ? "a collective failed" : "an error ends this task")
                 << ": leaving the worker group without the shutdown barrier";
    if (collective) {
      collective->leave();
      collective.reset();
    }
  } else {
    try {
      if (elastic) {
        // A member whose input lasts longer (it came back behind the others) is still in a
        // step's collective: leaving it ends that step, and the member learns the group is done.
        client->set(kGroupFinishedKey, "1");
        if (collective) collective->leave();
      }
      client->barrier("shutdown", 30);
    } catch (const std::exception& e) {
      LOG(WARNING) << "shutdown barrier: " << e.what();
    }
  }
  client->stop_heartbeats();
  if (service && leaving) {
    // The others ask the service why their collective broke: it answers before it goes.
    service->linger_after_failure(task, /*seconds=*/2);
  }
  if (service) service->stop();
}

std::unique_ptr<WorkerGroup> join_worker_group(const ClusterConfig& cluster,
                                               const MultiWorkerOptions& options) {
  ensure_logging();  // before the Strategy that will hold the group exists
  int rank = cluster.global_task_id();
  if (rank < 0) {
    throw InvalidArgumentError(str_cat("task ", cluster.task.to_string(),
                                       " does not train (only the chief and the workers do)"));
  }
  std::vector<TaskId> tasks = cluster.training_tasks();
  auto group = std::make_unique<WorkerGroup>();
  group->task = cluster.task.to_string();
  if (tasks.size() == 1 && !cluster.has_job("client")) {  // a client hosts a service to join
    group->client = std::make_unique<SoleTaskClient>();
    group->collective = std::make_unique<FailureNotingCollective>(
        std::make_unique<SoleTaskCollective>(), &group->collective_failed, group->client.get());
    return group;
  }
  std::string chief_address = cluster.address(cluster.chief());
  if (cluster.is_chief()) {
    group->service =
        CoordinationService::start(chief_address, tasks, options.coordination, cluster.security);
  }
  group->client = CoordinationClient::connect(chief_address, cluster.task, options.coordination,
                                              cluster.security);
  const bool late = options.coordination.elastic && group_is_running(*group->client);
  if (!late) group->client->register_task(options.registration_timeout_seconds);
  std::string own = cluster.address(cluster.task);
  std::string host = own.substr(0, own.rfind(':'));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  HostCollectiveOptions collective;
  collective.transport = options.shared_memory ? HostTransport::kAuto : HostTransport::kGloo;
  collective.timeout_seconds = options.collective_timeout_seconds;
  CoordinationClient* client = group->client.get();
  collective.peer_failure = [client] { return client->failure(); };
  if (options.coordination.elastic) {
    auto noting = std::make_unique<FailureNotingCollective>(nullptr, &group->collective_failed,
                                                            group->client.get());
    group->elastic = std::make_unique<ElasticMembership>();
    group->elastic->host = host;
    group->elastic->options = collective;
    for (const TaskId& task : tasks) group->elastic->tasks.push_back(task.to_string());
    group->elastic->replace = [raw = noting.get()](std::unique_ptr<ProcessCollective> inner) {
      raw->replace(std::move(inner));
    };
    group->collective = std::move(noting);
    if (late) {
      // Alone until its first step boundary: restored, with its slots made, it joins then.
      group->elastic->late = true;
      group->elastic->replace(std::make_unique<SoleTaskCollective>());
      LOG(INFO) << group->task << ": the worker group is running; joining it after a first "
                << "step alone";
      return group;
    }
    join_first_generation(*group, options.registration_timeout_seconds);
    return group;
  }
  for (const TaskId& task : tasks) collective.rank_names.push_back(task.to_string());
  group->collective = std::make_unique<FailureNotingCollective>(
      host_collective(*group->client, rank, static_cast<int>(tasks.size()), host, collective),
      &group->collective_failed, group->client.get());
  return group;
}

}  // namespace cadre
