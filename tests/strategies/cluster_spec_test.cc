// TF_CONFIG as orchestrators write it, what it resolves to, and every mistake named.
#include "cadre/strategies/cluster_spec.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"

namespace cadre {
namespace {

TEST(ClusterSpecTest, ChiefWorkersAndAnEvaluatorOutsideTheCluster) {
  ClusterConfig c = parse_tf_config(R"({
      "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]},
      "task": {"type": "worker", "index": 1}, "environment": "cloud"})");
  EXPECT_EQ(c.task.to_string(), "worker:1");
  EXPECT_FALSE(c.is_chief());
  EXPECT_EQ(c.chief().to_string(), "chief:0");
  EXPECT_EQ(c.num_worker_replicas(), 3);
  EXPECT_EQ(c.global_task_id(), 2);
  EXPECT_EQ(c.address(c.task), "host2:2222");
  EXPECT_EQ(c.environment, "cloud");

  ClusterConfig evaluator = parse_tf_config(R"({
      "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"]},
      "task": {"type": "evaluator", "index": 0}})");
  EXPECT_FALSE(evaluator.is_chief());
  EXPECT_EQ(evaluator.global_task_id(), -1);
  EXPECT_NE(evaluator.explain().find("evaluator: follows"), std::string::npos);
}

TEST(ClusterSpecTest, TheEvaluatorInsideTheClusterToo) {
  ClusterConfig c = parse_tf_config(R"({
      "cluster": {"chief": ["h:1"], "worker": ["h:2"], "evaluator": ["h:3"]},
      "task": {"type": "evaluator", "index": 0}})");
  EXPECT_EQ(c.address(c.task), "h:3");
  EXPECT_EQ(c.num_worker_replicas(), 2);  // the evaluator does not train
}

TEST(ClusterSpecTest, WithoutAChiefWorkerZeroActsAsChief) {
  ClusterConfig c = parse_tf_config(R"({"cluster": {"worker": ["a:1", "b:1"]},
                                        "task": {"type": "worker", "index": 0}})");
  EXPECT_TRUE(c.is_chief());
  EXPECT_EQ(c.global_task_id(), 0);
  EXPECT_NE(c.explain().find("worker 0 acts as chief"), std::string::npos) << c.explain();
}

// Coordinator mode: the client plays the chief's part and does not train; the workers
// train what it dispatches. A client beside a chief, or without workers, is one clear error.
TEST(ClusterSpecTest, AClientTakesTheChiefsPlaceInCoordinatorMode) {
  const char* cluster =
      R"("cluster": {"client": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]})";
  ClusterConfig client =
      parse_tf_config(std::string("{") + cluster + R"(, "task": {"type": "client", "index": 0}})");
  EXPECT_TRUE(client.is_chief());
  EXPECT_EQ(client.chief().to_string(), "client:0");
  EXPECT_EQ(client.global_task_id(), -1);
  EXPECT_EQ(client.num_worker_replicas(), 2);
  EXPECT_NE(client.explain().find("client: dispatches training steps"), std::string::npos)
      << client.explain();
  ClusterConfig worker =
      parse_tf_config(std::string("{") + cluster + R"(, "task": {"type": "worker", "index": 0}})");
  EXPECT_FALSE(worker.is_chief());
  EXPECT_EQ(worker.global_task_id(), 0);
  EXPECT_NE(worker.explain().find("running the steps the client dispatches"), std::string::npos);

  auto error_of = [](const std::string& json) {
    try {
      parse_tf_config(json);
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"cluster": {"client": ["c:1"], "ps": ["p:1"]},
                         "task": {"type": "client", "index": 0}})")
                .find("has a client but no worker"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cluster": {"client": ["c:1"], "chief": ["h:1"], "worker": ["w:1"]},
                         "task": {"type": "client", "index": 0}})")
                .find("has a client and a chief"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cluster": {"client": ["c:1", "c:2"], "worker": ["w:1"]},
                         "task": {"type": "client", "index": 1}})")
                .find("at most one client"),
            std::string::npos);
}

TEST(ClusterSpecTest, KubeflowSparseCluster) {
  ClusterConfig c = parse_tf_config(R"({
      "sparseCluster": {"chief": {"0": "c:2222"}, "worker": {"3": "w3:2222"}},
      "task": {"type": "worker", "index": 3}})");
  EXPECT_EQ(c.address(c.task), "w3:2222");
  EXPECT_EQ(c.num_tasks("worker"), 4);  // at least indexes 0..3
  EXPECT_EQ(c.global_task_id(), 4);
}

TEST(ClusterSpecTest, PsTasksAndTheCollectiveCheck) {
  ClusterConfig c = parse_tf_config(R"({
      "cluster": {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1", "p:2"]},
      "task": {"type": "ps", "index": 1}, "rpc_layer": "grpc"})");
  EXPECT_EQ(c.num_ps_replicas(), 2);
  EXPECT_EQ(c.global_task_id(), -1);
  EXPECT_THROW(check_no_ps(c, "MultiWorkerMirroredStrategy"), InvalidArgumentError);
}

void expect_mistake(const std::string& json, const std::string& fragment) {
  try {
    parse_tf_config(json);
    ADD_FAILURE() << "accepted: " << json;
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << fragment;
  }
}

TEST(ClusterSpecTest, EveryMistakeNamesTheFieldAndTheValue) {
  expect_mistake("{not json", "not valid JSON");
  expect_mistake(R"({"cluster": {"worker": ["a:1"]}})", "task is missing");
  expect_mistake(R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})",
                 "task.type is missing");
  expect_mistake(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "boss", "index": 0}})",
                 "task.type = \"boss\" is unknown");
  expect_mistake(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}})",
                 "task.type = \"chief\" has no tasks in cluster (it lists: worker)");
  expect_mistake(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}})",
      "task.index = 2 is out of range: cluster.worker has 2 tasks");
  expect_mistake(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})",
                 "task.index = -1");
  expect_mistake(R"({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}})",
                 "cluster.chief has 2 tasks; a cluster has at most one chief");
  expect_mistake(
      R"({"cluster": {"worker": ["a:1"], "evaluator": ["e:1", "f:1"]}, "task": {"type": "worker"}})",
      "at most one evaluator");
  expect_mistake(R"({"cluster": {"chief": ["a:1"], "worker": ["a:1"]}, "task": {"type": "chief"}})",
                 "cluster.worker[0] = \"a:1\" is used twice: also by cluster.chief[0]");
  expect_mistake(R"({"cluster": {"worker": ["a"]}, "task": {"type": "worker"}})",
                 "cluster.worker[0] = \"a\" is not host:port");
  expect_mistake(R"({"cluster": {"worker": ["a:99999"]}, "task": {"type": "worker"}})",
                 "cluster.worker[0] = \"a:99999\" is not host:port");
  expect_mistake(R"({"cluster": {"worker": [":1"]}, "task": {"type": "worker"}})",
                 "is not host:port");
  expect_mistake(R"({"cluster": {"workers": ["a:1"]}, "task": {"type": "worker"}})",
                 "cluster.workers names an unknown task type");
  expect_mistake(R"({"cluster": {"worker": "a:1"}, "task": {"type": "worker"}})",
                 "cluster.worker = \"a:1\" is not a list");
  expect_mistake(
      R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}, "rpc_layer": "mpi"})",
      "rpc_layer = \"mpi\" is not supported");
  expect_mistake(R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}})",
                 "no chief and no worker");
  expect_mistake(R"({"task": {"type": "evaluator", "index": 1}})", "there is one evaluator");
}

TEST(ClusterSpecTest, IPv6AddressesInBrackets) {
  ClusterConfig c = parse_tf_config(R"({"cluster": {"worker": ["[::1]:2222"]},
                                        "task": {"type": "worker", "index": 0}})");
  EXPECT_EQ(c.address(c.task), "[::1]:2222");
  expect_mistake(R"({"cluster": {"worker": ["::1:2222"]}, "task": {"type": "worker"}})",
                 "is not host:port");
}

TEST(ClusterSpecTest, SlurmJobStepsBecomeClusters) {
  EXPECT_EQ(expand_hostlist("node[01-03,07],gpu5"),
            (std::vector<std::string>{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(expand_hostlist("a,b[9-10]"), (std::vector<std::string>{"a", "b9", "b10"}));
  EXPECT_THROW(expand_hostlist("node[3-1]"), InvalidArgumentError);
  EXPECT_THROW(expand_hostlist("node[1-2"), InvalidArgumentError);
  // Found by fuzzing: a number past long's range, and a range of more hosts than any
  // cluster has, are typed errors (not std::out_of_range, not gigabytes of names).
  EXPECT_THROW(expand_hostlist("n[1-44444444444444444444444]"), InvalidArgumentError);
  EXPECT_THROW(expand_hostlist("n[1-999999999]"), InvalidArgumentError);
  EXPECT_EQ(expand_hostlist("n[1-65536]").size(), 65536u);
  EXPECT_THROW(expand_hostlist("n[1-65536],m"), InvalidArgumentError);
  std::map<std::string, std::string> env{{"SLURM_PROCID", "2"},
                                         {"SLURM_NTASKS", "3"},
                                         {"SLURM_STEP_NODELIST", "n[1-2]"},
                                         {"SLURM_STEP_TASKS_PER_NODE", "2,1"}};
  ClusterConfig c = cluster_from_slurm(env);
  EXPECT_EQ(c.task.to_string(), "worker:1");
  EXPECT_EQ(c.address({"chief", 0}), "n1:8888");
  EXPECT_EQ(c.address({"worker", 0}), "n1:8889");
  EXPECT_EQ(c.address({"worker", 1}), "n2:8888");
  EXPECT_EQ(c.global_task_id(), 2);
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";
  try {
    cluster_from_slurm(env);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_NTASKS = 3"), std::string::npos) << e.what();
  }
  env.erase("SLURM_PROCID");
  EXPECT_THROW(cluster_from_slurm(env), InvalidArgumentError);
}

// CADRE_SLURM_JOBS gives the task types in SLURM_PROCID order, the evaluator outside the
// cluster (TensorFlow's SlurmClusterResolver(jobs=...)); CADRE_SLURM_PORT_BASE the ports.
TEST(ClusterSpecTest, SlurmJobStepsWithRolesAndAPortBase) {
  std::map<std::string, std::string> env{{"SLURM_NTASKS", "4"},
                                         {"SLURM_STEP_NODELIST", "localhost"},
                                         {"SLURM_STEP_TASKS_PER_NODE", "4"},
                                         {"CADRE_SLURM_JOBS", "chief:1,ps:1,worker:1,evaluator:1"},
                                         {"CADRE_SLURM_PORT_BASE", "20000"}};
  std::vector<std::string> roles;
  for (int procid = 0; procid < 4; ++procid) {
    env["SLURM_PROCID"] = std::to_string(procid);
    roles.push_back(cluster_from_slurm(env).task.to_string());
  }
  EXPECT_EQ(roles, (std::vector<std::string>{"chief:0", "ps:0", "worker:0", "evaluator:0"}));
  ClusterConfig evaluator = cluster_from_slurm(env);
  EXPECT_EQ(evaluator.address({"ps", 0}), "localhost:20001");
  EXPECT_EQ(evaluator.address({"worker", 0}), "localhost:20002");
  EXPECT_EQ(evaluator.num_worker_replicas(), 2);
  for (const char* bad : {"chief:1,worker:1", "chief:2,worker:2", "boss:1,worker:3",
                          "chief:1,worker", "chief:1,worker:x,ps:1"}) {
    env["CADRE_SLURM_JOBS"] = bad;
    try {
      cluster_from_slurm(env);
      ADD_FAILURE() << bad;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("CADRE_SLURM_JOBS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cadre
