#include "strategies/cluster/elastic_group.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/membership.h"

namespace cadre {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_until(Clock::time_point end) {
  return std::chrono::duration<double>(end - Clock::now()).count();
}

// OutOfRangeError once the members have finished training: nobody will join this task.
void check_not_finished(CoordinationClient& client) {
  try {
    client.get(kGroupFinishedKey, 0);
  } catch (const DeadlineExceededError&) {
    return;
  }
  throw OutOfRangeError("the worker group finished training");
}

// The keys of one generation's collective, under a prefix of their own. Waiting for a key
// gives up once a newer generation exists: some of this one's members will never set theirs.
class GenerationStore final : public Store {
 public:
  GenerationStore(CoordinationClient& client, int64_t generation)
      : client_(client), generation_(generation), prefix_(str_cat("view/", generation, "/")) {}

  void set(const std::string& key, const std::string& value) override {
    client_.set(prefix_ + key, value);
  }
  std::string get(const std::string& key, double timeout_seconds) override {
    constexpr double kSlice = 0.5;
    auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(timeout_seconds));
    while (true) {
      double left = std::max(0.0, seconds_until(end));
      try {
        return client_.get(prefix_ + key, std::min(left, kSlice));
      } catch (const DeadlineExceededError&) {
        check_not_finished(client_);
        if (int64_t newest = client_.view_generation(); newest > generation_) {
          throw AbortedError(str_cat("the worker group changed (generation ", newest,
                                     ") while generation ", generation_, " was forming"));
        }
        if (left <= kSlice) throw;
      }
    }
  }
  void wait(const std::vector<std::string>& keys, double timeout_seconds) override {
    auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(timeout_seconds));
    for (const std::string& key : keys) get(key, std::max(0.0, seconds_until(end)));
  }

 private:
  CoordinationClient& client_;
  int64_t generation_;
  std::string prefix_;
};

// Joins generation `generation`, whose members are `members`.
void join_generation(WorkerGroup& group, int64_t generation, std::vector<std::string> members) {
  ElasticMembership& elastic = *group.elastic;
  auto place = std::find(members.begin(), members.end(), group.task);
  if (place == members.end()) {
    throw AbortedError(str_cat("the worker group went on without ", group.task, " (generation ",
                               generation, ": ", join(members), "); restart it to rejoin"));
  }
  const int rank = static_cast<int>(place - members.begin());
  // The broken collective goes first: its shared memory or sockets, and its generation's keys.
  elastic.replace(nullptr);
  elastic.store.reset();
  auto store = std::make_unique<GenerationStore>(*group.client, generation);
  HostCollectiveOptions options = elastic.options;
  options.rank_names = members;
  CoordinationClient* client = group.client.get();
  options.peer_failure = [client, generation]() -> std::string {
    if (std::string failure = client->failure(); !failure.empty()) return failure;
    if (int64_t newest = client->view_generation(); newest > generation) {
      return str_cat("the worker group changed (generation ", generation, " -> ", newest, ")");
    }
    return "";
  };
  elastic.replace(
      host_collective(*store, rank, static_cast<int>(members.size()), elastic.host, options));
  elastic.store = std::move(store);
  elastic.generation = generation;
  elastic.members = std::move(members);
  group.collective_failed.store(false, std::memory_order_relaxed);
  LOG(INFO) << group.task << ": joined the worker group's generation " << generation << " as rank "
            << rank << " of " << elastic.members.size() << " (" << join(elastic.members) << ")";
}

// Joins the newest generation, again while newer ones come, until `end`.
void join_newest(WorkerGroup& group, Clock::time_point end) {
  while (true) {
    const int64_t generation = group.client->view_generation();
    try {
      std::string view = group.client->get(view_key(generation), std::max(0.0, seconds_until(end)));
      join_generation(group, generation, parse_view(view));
      return;
    } catch (const AbortedError&) {
      if (group.client->view_generation() <= generation) throw;
    } catch (const DeadlineExceededError&) {
      if (group.client->view_generation() <= generation || seconds_until(end) <= 0) throw;
    }
    LOG(INFO) << group.task << ": generation " << generation << " changed while it formed";
  }
}

}  // namespace

void join_first_generation(WorkerGroup& group, double timeout_seconds) {
  join_newest(group, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(timeout_seconds)));
}

void join_running_group(WorkerGroup& group, double timeout_seconds) {
  LOG(INFO) << group.task << ": registering with the running worker group";
  group.client->register_task(timeout_seconds);
  group.elastic->late = false;
  join_first_generation(group, timeout_seconds);
}

bool group_is_running(CoordinationClient& client) {
  try {
    client.get(kGroupSteppedKey, 0);
    return true;
  } catch (const DeadlineExceededError&) {
    return false;
  } catch (const UnavailableError&) {
    return false;
  }
}

void end_if_group_finished(WorkerGroup& group) {
  try {
    check_not_finished(*group.client);
  } catch (const OutOfRangeError&) {
    group.collective_failed.store(false, std::memory_order_relaxed);
    throw;
  }
}

void reform_worker_group(WorkerGroup& group, double timeout_seconds) {
  if (!group.elastic) {
    throw FailedPreconditionError(str_cat(group.task, ": its worker group is not elastic"));
  }
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(timeout_seconds));
  const int64_t broken = group.elastic->generation;
  LOG(WARNING) << group.task << ": the collective of generation " << broken
               << " broke; waiting for the next generation of the worker group";
  group.client->report_broken(broken);
  while (group.client->view_generation() <= broken) {
    if (std::string failure = group.client->failure_now(1); !failure.empty()) {
      throw AbortedError(failure);
    }
    end_if_group_finished(group);
    if (seconds_until(end) <= 0) {
      throw DeadlineExceededError(str_cat("no new generation of the worker group within ",
                                          timeout_seconds, " s after generation ", broken,
                                          " broke"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  join_newest(group, end);
}

}  // namespace cadre
