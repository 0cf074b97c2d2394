// An elastic worker group on 127.0.0.1, its tasks threads of this process: the members that
// survive one that dies re-form the group without it and sum again, and a task restarted
// into the running group is admitted into the next generation when it registers.
#include "strategies/cluster/elastic_group.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cadre/base/errors.h"
#include "strategies/cluster/membership.h"
#include "strategies/cluster/worker_group.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

const std::vector<TaskId> kElasticTasks = {{"chief", 0}, {"worker", 0}, {"worker", 1}};

// The cluster of kElasticTasks, or of its first two tasks, seen by `task`.
ClusterConfig cluster_of(int port, const TaskId& task, size_t tasks = 3) {
  ClusterConfig cluster;
  cluster.jobs["chief"][0] = "127.0.0.1:" + std::to_string(port);
  cluster.jobs["worker"][0] = "127.0.0.1:1";  // Gloo's address only; one host shares memory
  if (tasks == 3) cluster.jobs["worker"][1] = "127.0.0.1:2";
  cluster.task = task;
  cluster.security = testing::test_security();
  return cluster;
}

MultiWorkerOptions elastic() {
  MultiWorkerOptions options;
  options.coordination.heartbeat_interval_seconds = 0.1;
  options.coordination.heartbeat_timeout_seconds = 1;
  options.coordination.elastic = true;
  options.registration_timeout_seconds = 20;
  options.collective_timeout_seconds = 20;
  return options;
}

// Every task of `tasks` (a prefix of kElasticTasks) joins the group, each on a thread.
std::vector<std::unique_ptr<WorkerGroup>> join_all(int port, const std::vector<TaskId>& tasks) {
  std::vector<std::unique_ptr<WorkerGroup>> groups(tasks.size());
  std::vector<std::future<void>> joining;
  for (size_t i = 0; i < tasks.size(); ++i) {
    joining.push_back(std::async(std::launch::async, [&, i] {
      groups[i] = join_worker_group(cluster_of(port, tasks[i], tasks.size()), elastic());
    }));
  }
  for (auto& j : joining) j.get();
  return groups;
}

double sum_of_ones(WorkerGroup& group) {
  double one = 1;
  group.collective->sum(&one, 1);
  return one;
}

// What the chief says after the group's first step: from then on the group is elastic.
void stepped(WorkerGroup& chief) { chief.client->set(kGroupSteppedKey, "1"); }

// Waits until the service has published a generation newer than the group's.
void await_change(WorkerGroup& group) {
  for (int i = 0; i < 200 && group.client->view_generation() <= group.elastic->generation; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST(ElasticGroupTest, SurvivorsReformWithoutADeadMemberAndAdmitItWhenItComesBack) {
  const int port = testing::free_port();
  std::vector<std::unique_ptr<WorkerGroup>> groups = join_all(port, kElasticTasks);
  std::vector<std::future<double>> sums;
  for (auto& g : groups) {
    sums.push_back(std::async(std::launch::async, [&g] { return sum_of_ones(*g); }));
  }
  for (auto& s : sums) EXPECT_EQ(s.get(), 3);
  stepped(*groups[0]);
  EXPECT_EQ(groups[2]->collective->rank(), 2);
  EXPECT_EQ(groups[2]->elastic->generation, 1);

  // worker:1 dies: no more heartbeats, and its collective gone.
  groups[2]->client->stop_heartbeats();
  groups[2]->collective->leave();
  groups[2].reset();

  std::vector<std::future<void>> survivors;
  for (int i = 0; i < 2; ++i) {
    survivors.push_back(std::async(std::launch::async, [&, i] {
      WorkerGroup& group = *groups[i];
      EXPECT_THROW(sum_of_ones(group), std::exception) << "a collective with a member gone";
      reform_worker_group(group, 20);
      EXPECT_EQ(group.elastic->generation, 2);
      EXPECT_EQ(group.collective->size(), 2);
      EXPECT_EQ(group.collective->rank(), i);
      EXPECT_EQ(sum_of_ones(group), 2);
      // worker:1 comes back: the members hear of it at their next step boundary.
      await_change(group);
      reform_worker_group(group, 20);
      EXPECT_EQ(group.elastic->generation, 3);
      EXPECT_EQ(sum_of_ones(group), 3);
    }));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past the heartbeat timeout
  auto back = std::async(std::launch::async, [&] {
    groups[2] = join_worker_group(cluster_of(port, kElasticTasks[2]), elastic());
    // Into a running group: alone (and unregistered) until it joins, at its first step.
    EXPECT_TRUE(groups[2]->elastic->late);
    EXPECT_EQ(sum_of_ones(*groups[2]), 1);
    join_running_group(*groups[2], 20);
    EXPECT_EQ(groups[2]->elastic->generation, 3);
    EXPECT_EQ(groups[2]->collective->rank(), 2);
    EXPECT_EQ(sum_of_ones(*groups[2]), 3);
  });
  for (auto& s : survivors) s.get();
  back.get();
  // The shutdown barrier is the members': all three pass it.
  std::vector<std::future<void>> ending;
  for (auto& g : groups) {
    ending.push_back(std::async(std::launch::async, [&g] { g.reset(); }));
  }
  for (auto& e : ending) e.get();
}

// A task the group went on without, still running, is told so when it tries to re-form.
TEST(ElasticGroupTest, ATaskTheGroupWentOnWithoutIsToldSo) {
  std::vector<std::unique_ptr<WorkerGroup>> groups =
      join_all(testing::free_port(), {{"chief", 0}, {"worker", 0}});
  stepped(*groups[0]);
  groups[1]->client->stop_heartbeats();  // hung, as far as the service can tell
  await_change(*groups[0]);
  reform_worker_group(*groups[0], 20);
  EXPECT_EQ(groups[0]->collective->size(), 1);
  EXPECT_EQ(sum_of_ones(*groups[0]), 1);
  try {
    reform_worker_group(*groups[1], 5);
    FAIL() << "re-formed a group that went on without it";
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("worker:0"), std::string::npos) << e.what();
  }
  groups[1].reset();
  groups[0].reset();
}

// Before the group's first step its members still make their variables together: a member
// that falls silent then fails the cluster, as in a group that is not elastic.
TEST(ElasticGroupTest, BeforeTheFirstStepADeadMemberFailsTheCluster) {
  std::vector<std::unique_ptr<WorkerGroup>> groups = join_all(testing::free_port(), kElasticTasks);
  groups[2]->client->stop_heartbeats();
  std::string failure;
  for (int i = 0; i < 100 && failure.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    failure = groups[0]->client->failure_now(1);
  }
  EXPECT_NE(failure.find("task worker:1 has sent no heartbeat"), std::string::npos) << failure;
  EXPECT_EQ(groups[0]->client->view_generation(), 1) << "no generation without it";
  for (auto& g : groups) g->collective->leave();
  groups.clear();
}

}  // namespace
}  // namespace cadre
