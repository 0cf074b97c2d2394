// The members of an elastic worker group (CoordinationOptions.elastic): the training tasks
// alive, in cluster order. Each change (a task declared dead, a task registering again)
// begins a generation, which the coordination service publishes in its key-value store
// under view_key(generation) as the members' names joined by ','; a task hears of the
// newest generation with its heartbeats (CoordinationClient::view_generation).
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/multi_worker_options.h"

namespace cadre {

std::string view_key(int64_t generation);
// Task names for messages ("none" for none), and the tasks of `tasks` not in `have`.
std::string names(const std::set<std::string>& tasks);
std::set<std::string> not_in(const std::vector<std::string>& tasks,
                             const std::set<std::string>& have);
// Set by the members as they finish training: a task still joining them gives up.
inline constexpr char kGroupFinishedKey[] = "elastic/finished";
// Set by the service's host after the group's first step: from then on the group is elastic
// (a task restarted joins it late; a silent member is left behind).
inline constexpr char kGroupSteppedKey[] = "elastic/stepped";
std::vector<std::string> parse_view(const std::string& value);

// Not thread-safe: the coordination service's mutex guards it.
class Membership {
 public:
  explicit Membership(const std::vector<TaskId>& tasks);
  int64_t generation() const { return generation_; }                // 0 until the group first forms
  const std::vector<std::string>& order() const { return order_; }  // every task's name
  const std::vector<std::string>& members() const { return members_; }
  bool contains(const std::string& task) const;
  // The next generation, of the tasks of `alive` (of the cluster's), in cluster order;
  // returns the key and value to publish.
  std::pair<std::string, std::string> change(const std::set<std::string>& alive);
  // A member's collective of `generation` broke: while that generation lasts, a member
  // silent for two heartbeat intervals is dead, not only one silent for the timeout.
  void note_broken(int64_t generation) { broken_ |= generation == generation_; }
  double silence_allowed(const CoordinationOptions& options) const {
    return broken_
               ? std::min(options.heartbeat_timeout_seconds, 2 * options.heartbeat_interval_seconds)
               : options.heartbeat_timeout_seconds;
  }
  // Not formed: generation 0, no members (a new round of the service).
  void reset() {
    members_.clear();
    generation_ = 0;
  }

 private:
  std::vector<std::string> order_;
  std::vector<std::string> members_;
  int64_t generation_ = 0;
  bool broken_ = false;
};

}  // namespace cadre
