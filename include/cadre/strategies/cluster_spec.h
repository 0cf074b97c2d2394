// The cluster a process belongs to and its place in it, as TF_CONFIG describes them:
//
//   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
//                "evaluator": ["host3:2222"]},
//    "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}
//
// A "client" job of one task is coordinator mode (docs/DEPLOY.md): the client drives the
// workers, which serve, and it plays the chief's part (a cluster has a client or a chief,
// not both). Every form orchestrators produce is accepted: the evaluator inside `cluster` or
// outside it, no chief (worker 0 then acts as chief), and Kubeflow TFJob's `sparseCluster`, which
// maps job -> {index -> address} and may list only some tasks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/strategies/cluster_security.h"

namespace cadre {

struct TaskId {
  std::string type;  // "chief", "worker", "ps", "evaluator", "client"
  int index = 0;
  std::string to_string() const;  // "worker:1"
  bool operator==(const TaskId&) const = default;
  bool operator<(const TaskId& other) const {
    return type != other.type ? type < other.type : index < other.index;
  }
};

class ClusterConfig {
 public:
  // Job name -> index -> "host:port". Sparse: an index may be missing (sparseCluster).
  std::map<std::string, std::map<int, std::string>> jobs;
  TaskId task;
  std::string rpc_layer;    // "grpc" when unset
  std::string environment;  // TF_CONFIG's optional "environment" ("cloud", ...)
  // Not in TF_CONFIG: the job's secret and TLS files (RunConfig::from_environment fills it).
  ClusterSecurity security;

  // Tasks of a job, counting the highest index given (a sparse job's size is a lower bound).
  int num_tasks(const std::string& job) const;
  bool has_job(const std::string& job) const { return num_tasks(job) > 0; }
  // The address of a task; throws InvalidArgumentError naming the task when unknown.
  const std::string& address(const TaskId& task) const;

  // The task that coordinates training (hosts the coordination service, saves
  // checkpoints): the client in coordinator mode, else the chief, or worker 0 when there is
  // no chief.
  TaskId chief() const;
  bool is_chief() const;
  // Tasks that train together (chief and workers), and this task's index among them
  // (chief 0, then the workers in order), or `task`'s; -1 for ps, evaluator and client.
  std::vector<TaskId> training_tasks() const;
  int num_worker_replicas() const;
  int num_ps_replicas() const { return num_tasks("ps"); }
  int global_task_id() const { return training_index(task); }
  int training_index(const TaskId& of) const;

  // Several lines a person reads: the role, the chief, the peers, the global id.
  std::string explain() const;
};

// Parses TF_CONFIG's JSON (with protobuf's JSON support) and validates it. Throws
// InvalidArgumentError naming the field and the value of the first mistake: malformed
// JSON, a task type not in the cluster (the evaluator may be left out), an index out of
// range, two chiefs, evaluators or clients, a client beside a chief or without workers, an
// address used twice, an address that is not host:port.
ClusterConfig parse_tf_config(std::string_view json);

// Slurm's view of a job step as a cluster (TensorFlow's SlurmClusterResolver): the tasks
// SLURM_NTASKS, this one SLURM_PROCID, placed over the nodes of SLURM_STEP_NODELIST (or
// SLURM_JOB_NODELIST; hostlist syntax "node[01-03,07],gpu5") per SLURM_STEP_TASKS_PER_NODE
// (or SLURM_TASKS_PER_NODE; "2(x3),1"), each on port_base (or CADRE_SLURM_PORT_BASE) + its
// index on its node. CADRE_SLURM_JOBS ("chief:1,worker:2,ps:1,evaluator:1") gives the task
// types in order of SLURM_PROCID, the evaluator outside the cluster; without it task 0 is
// the chief, the others workers. `env` holds the variables (the caller reads them). Throws
// InvalidArgumentError naming a missing or malformed variable.
ClusterConfig cluster_from_slurm(const std::map<std::string, std::string>& env,
                                 int port_base = 8888);
// "node[01-03],gpu5" -> node01 node02 node03 gpu5.
std::vector<std::string> expand_hostlist(const std::string& hostlist);

// Throws InvalidArgumentError when `config` has ps tasks: collective strategies have none.
void check_no_ps(const ClusterConfig& config, std::string_view strategy);

}  // namespace cadre
