// An elastic worker group (CoordinationOptions.elastic): its collective is that of one
// generation of members (strategies/cluster/membership.h), and after it breaks (a member
// died, or one joined) the members join the collective of the next generation instead of
// failing. Ranks are places in a generation's members, so they change as members come and
// go; a task's name does not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategies/cluster/worker_group.h"
#include "strategies/collectives/host_collective.h"

namespace cadre {

// What joining a generation's collective takes. The group's `collective` is a wrapper whose
// inner collective `replace` swaps, so that references to it stay valid.
struct ElasticMembership {
  int64_t generation = 0;            // of the collective joined; 0 before the first
  std::vector<std::string> members;  // of that generation, in rank order
  std::vector<std::string> tasks;    // every training task of the cluster, in its order
  // Restarted into a running group: not registered yet, and alone in its collective.
  bool late = false;
  std::string host;               // where peers reach this task (for Gloo)
  HostCollectiveOptions options;  // without rank names and peer_failure, set per generation
  std::function<void(std::unique_ptr<ProcessCollective>)> replace;
  std::unique_ptr<Store> store;  // the generation's keys, alive as long as its collective
};

// Joins the collective of the newest generation, waiting up to `timeout_seconds` for one
// newer than the group's (the coordination service declares a dead member after its
// heartbeat timeout), and again while generations change under it. Throws
// DeadlineExceededError when none comes, AbortedError when this task is not a member of
// it (the group went on without it) or the cluster failed, OutOfRangeError once the members
// finished training (kGroupFinishedKey), FailedPreconditionError for a group that is not
// elastic.
void reform_worker_group(WorkerGroup& group, double timeout_seconds);

// OutOfRangeError once the members finished training: they left their collective (one whose
// input lasted longer was still in a step's). Not a failure of this task's: it meets them at
// the shutdown barrier.
void end_if_group_finished(WorkerGroup& group);

// The first join: the generation this task registered into.
void join_first_generation(WorkerGroup& group, double timeout_seconds);

// A late joiner's (ElasticMembership::late) registration and first join.
void join_running_group(WorkerGroup& group, double timeout_seconds);

// Whether the group at the client's service has taken its first step (kGroupSteppedKey): a
// task starting then is a late joiner. False when the service is not up yet.
bool group_is_running(CoordinationClient& client);

}  // namespace cadre
