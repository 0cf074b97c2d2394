// The coordination service on 127.0.0.1 with its clients as threads of this process:
// registration, the key-value store, barriers, and every failure named.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/strategies/multi_worker_mirrored_strategy.h"
#include "strategies/cluster/coordination_service.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

const std::vector<TaskId> kTasks = {{"chief", 0}, {"worker", 0}, {"worker", 1}};

CoordinationOptions fast() {
  CoordinationOptions options;
  options.heartbeat_interval_seconds = 0.1;
  options.heartbeat_timeout_seconds = 1;
  options.log_every_seconds = 0.5;
  return options;
}

std::unique_ptr<CoordinationService> serve(const std::string& address, std::vector<TaskId> tasks) {
  return CoordinationService::start(address, std::move(tasks), fast(), testing::test_security());
}

std::unique_ptr<CoordinationClient> join(const std::string& address, TaskId task) {
  return CoordinationClient::connect(address, std::move(task), fast(), testing::test_security());
}

TEST(CoordinationTest, TasksRegisterShareKeysAndMeetAtBarriers) {
  auto service = serve("127.0.0.1:0", kTasks);
  std::vector<std::future<std::string>> tasks;
  for (const TaskId& task : kTasks) {
    tasks.push_back(std::async(std::launch::async, [&, task] {
      auto client = join(service->address(), task);
      client->register_task(10);
      if (task.type == "chief") client->set("gloo/rendezvous", "ring of 3");
      std::string value = client->get("gloo/rendezvous", 10);
      client->barrier("after_rendezvous", 10);
      client->barrier("shutdown", 10);
      EXPECT_EQ(client->failure(), "");
      return value;
    }));
  }
  for (auto& t : tasks) EXPECT_EQ(t.get(), "ring of 3");
}

TEST(CoordinationTest, RegistrationTimesOutNamingTheTasksThatNeverCame) {
  auto service = serve("127.0.0.1:0", kTasks);
  auto chief = std::async(std::launch::async, [&] {
    join(service->address(), {"chief", 0})->register_task(1);
  });
  auto worker = join(service->address(), {"worker", 0});
  try {
    worker->register_task(1);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("never registered: worker:1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(chief.get(), DeadlineExceededError);
}

TEST(CoordinationTest, ADeadTaskIsNamedToTheSurvivorsWithinTheHeartbeatTimeout) {
  auto service = serve("127.0.0.1:0", kTasks);
  std::vector<std::unique_ptr<CoordinationClient>> clients;
  std::vector<std::future<void>> registering;
  for (const TaskId& task : kTasks) {
    clients.push_back(join(service->address(), task));
  }
  for (auto& client : clients) {
    registering.push_back(std::async(std::launch::async, [&client] { client->register_task(10); }));
  }
  for (auto& r : registering) r.get();
  clients[2]->stop_heartbeats();  // worker:1 "dies"
  auto start = std::chrono::steady_clock::now();
  while (clients[0]->failure().empty() &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 3.0);
  EXPECT_NE(clients[0]->failure().find("task worker:1 has sent no heartbeat"), std::string::npos)
      << clients[0]->failure();
  // A survivor waiting in a barrier is released with the same news.
  try {
    clients[1]->barrier("step_100", 10);
    FAIL();
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("worker:1"), std::string::npos) << e.what();
  }
}

// A task that fails by itself reports its error: the cluster fails with it, and another
// task asking the service now learns it without waiting for a heartbeat. A report from a
// task that is not registered changes nothing.
TEST(CoordinationTest, AReportedErrorFailsTheClusterWithItsText) {
  auto service = serve("127.0.0.1:0", {{"chief", 0}, {"worker", 0}});
  auto chief = join(service->address(), {"chief", 0});
  auto worker = join(service->address(), {"worker", 0});
  auto registering = std::async(std::launch::async, [&] { worker->register_task(10); });
  chief->register_task(10);
  registering.get();
  join(service->address(), {"worker", 0})->report_error("an impostor's words", 2);
  EXPECT_EQ(worker->failure_now(2), "");
  chief->report_error("DataLossError: train-00003 is damaged", 2);
  EXPECT_EQ(worker->failure_now(2), "task chief:0 failed: DataLossError: train-00003 is damaged");
  EXPECT_THROW(worker->barrier("shutdown", 10), AbortedError);
}

// A client of coordinator mode hosting the service: it reads the failure, begins a new round
// in which the tasks register again, and the tasks of the failed round are told to stop by
// their next heartbeat; the shutdown barrier says when every task has passed it.
TEST(CoordinationTest, ANewRoundAfterAFailureStopsTheOldTasksAndTakesNewOnes) {
  auto service = serve("127.0.0.1:0", kTasks);
  auto register_all = [&] {
    std::vector<std::unique_ptr<CoordinationClient>> clients;
    std::vector<std::future<void>> registering;
    for (const TaskId& task : kTasks) clients.push_back(join(service->address(), task));
    for (auto& client : clients) {
      registering.push_back(
          std::async(std::launch::async, [&client] { client->register_task(10); }));
    }
    for (auto& r : registering) r.get();
    return clients;
  };
  auto old_round = register_all();
  EXPECT_EQ(service->failure(), "");
  old_round[2]->stop_heartbeats();  // worker:1 dies
  auto start = std::chrono::steady_clock::now();
  while (service->failure().empty() &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(service->failure().find("worker:1"), std::string::npos) << service->failure();

  service->begin_round();
  EXPECT_EQ(service->failure(), "");
  auto new_round = register_all();
  // The survivors of the old round (their incarnations are not registered any more) stop.
  start = std::chrono::steady_clock::now();
  while (old_round[0]->failure().empty() &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(old_round[0]->failure().empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // heartbeats of the new round
  EXPECT_EQ(new_round[0]->failure(), "");
  EXPECT_EQ(service->failure(), "");
  EXPECT_FALSE(service->barrier_complete("shutdown"));
  std::vector<std::future<void>> leaving;
  for (auto& client : new_round) {
    leaving.push_back(
        std::async(std::launch::async, [&client] { client->barrier("shutdown", 10); }));
  }
  for (auto& l : leaving) l.get();
  EXPECT_TRUE(service->barrier_complete("shutdown"));
  for (auto& client : old_round) client->stop_heartbeats();
  for (auto& client : new_round) client->stop_heartbeats();
}

// Planned stops with a service that outlives the tasks (a coordinator-mode client's): tasks
// that all passed the planned-stop barrier fall silent without failing the cluster, and a
// restarted one's registration begins a new round (it failed the cluster before). The
// host's own request for a planned stop reaches every task's heartbeats, and a task that
// registers anew meanwhile waits for the host's successor at the same address.
TEST(CoordinationTest, TasksStoppedAsPlannedRestartInANewRoundAndTheHostCanAskForAStop) {
  const std::vector<TaskId> tasks = {{"worker", 0}, {"worker", 1}};
  auto service = serve("127.0.0.1:0", tasks);
  const std::string address = service->address();
  auto register_all = [&] {
    std::vector<std::unique_ptr<CoordinationClient>> clients;
    std::vector<std::future<void>> registering;
    for (const TaskId& task : tasks) clients.push_back(join(address, task));
    for (auto& client : clients) {
      registering.push_back(
          std::async(std::launch::async, [&client] { client->register_task(10); }));
    }
    for (auto& r : registering) r.get();
    return clients;
  };
  auto first = register_all();
  std::vector<std::future<void>> stopping;
  for (auto& client : first) {
    stopping.push_back(std::async(std::launch::async, [&client] {
      client->barrier(kPlannedStopBarrier, 10);
      client->stop_heartbeats();  // the process exits
    }));
  }
  for (auto& s : stopping) s.get();
  EXPECT_TRUE(service->stopped_as_planned());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the heartbeat timeout
  EXPECT_EQ(service->failure(), "");
  auto second = register_all();
  EXPECT_EQ(service->failure(), "");
  EXPECT_FALSE(service->stopped_as_planned());

  EXPECT_FALSE(second[0]->planned_stop_requested());
  service->request_planned_stop();
  auto start = std::chrono::steady_clock::now();
  while (!(second[0]->planned_stop_requested() && second[1]->planned_stop_requested()) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(second[0]->planned_stop_requested());
  EXPECT_TRUE(second[1]->planned_stop_requested());
  // A restarted worker:1 registers while the host stops: it is held, and registers with
  // the service that takes the address next.
  for (auto& client : second) client->stop_heartbeats();
  auto late = join(address, {"worker", 1});
  auto late_registration = std::async(std::launch::async, [&] { late->register_task(20); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  service->stop();
  service.reset();
  auto successor = serve(address, tasks);
  auto worker0 = join(address, {"worker", 0});
  worker0->register_task(20);
  late_registration.get();
  EXPECT_TRUE(successor->formed());
  EXPECT_FALSE(worker0->planned_stop_requested());
  worker0->stop_heartbeats();
  late->stop_heartbeats();
}

TEST(CoordinationTest, TimeoutsAndBadAddressesAreNamed) {
  auto service = serve("127.0.0.1:0", {{"worker", 0}});
  auto client = join(service->address(), {"worker", 0});
  client->register_task(5);
  try {
    client->get("nccl/unique_id", 0.3);
    FAIL();
  } catch (const DeadlineExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("'nccl/unique_id'"), std::string::npos) << e.what();
  }
  // The port is taken: a clear bind error naming the address.
  try {
    serve(service->address(), {{"worker", 0}});
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(service->address()), std::string::npos) << e.what();
  }
  auto stranger = join(service->address(), {"worker", 7});
  EXPECT_THROW(stranger->register_task(1), InvalidArgumentError);
}

TEST(CoordinationTest, MultiWorkerStrategyRefusesNcclOnCpusBeforeJoiningAnyone) {
  ClusterConfig cluster = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
          "task": {"type": "worker", "index": 0}})");
  EXPECT_THROW(
      MultiWorkerMirroredStrategy::create(cluster, {Device::cpu(0)}, {}, Communication::kNccl),
      InvalidArgumentError);
  ClusterConfig with_ps = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:3"]},
          "task": {"type": "chief", "index": 0}})");
  EXPECT_THROW(MultiWorkerMirroredStrategy::create(with_ps), InvalidArgumentError);
}

// A chief alone, as RunConfig makes it (no secret read, not insecure), is a group of one: it
// needs no coordination service (nothing listens on its port), and its replicas' gradients
// are summed as in one process.
TEST(CoordinationTest, MultiWorkerStrategyOfOneTaskStartsWithoutAServiceOrASecret) {
  int port = testing::free_port();
  ClusterConfig cluster =
      parse_tf_config(R"({"cluster": {"chief": ["127.0.0.1:)" + std::to_string(port) +
                      R"("]}, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(cluster.security.secret.empty());
  ASSERT_FALSE(cluster.security.insecure);
  auto strategy = MultiWorkerMirroredStrategy::create(cluster, {Device::cpu(0), Device::cpu(1)});
  EXPECT_EQ(strategy->num_workers(), 1);
  EXPECT_EQ(strategy->worker_index(), 0);
  EXPECT_EQ(strategy->num_replicas_in_sync(), 2);
  PerReplica<Tensor> values{Tensor::from_vector<float>({1, 2}), Tensor::from_vector<float>({3, 6})};
  EXPECT_EQ(strategy->reduce(ReduceOp::kSum, values).to_vector<float>(),
            (std::vector<float>{4, 8}));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << "something listens on the chief's port " << port;
  ::close(fd);
}

}  // namespace
}  // namespace cadre
