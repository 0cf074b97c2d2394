#include "cadre/estimator/run_config.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "cadre/base/errors.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "io/virtual_shards.h"

namespace cadre {
namespace {

// Only such a task serves or calls a service, and so needs the job's secret: an evaluator,
// or the one training task of a cluster, must not make the user's default on the way.
bool talks_to_other_tasks(const ClusterConfig& cluster) {
  return cluster.task.type != "evaluator" &&
         (cluster.num_worker_replicas() > 1 || cluster.num_ps_replicas() > 0 ||
          cluster.has_job("client"));
}

}  // namespace

RunConfig RunConfig::for_cluster(const ClusterConfig& cluster) {
  RunConfig config;
  config.cluster = cluster;
  config.task_type = cluster.task.type;
  config.task_id = cluster.task.index;
  config.is_chief = cluster.is_chief();
  config.num_worker_replicas = cluster.task.type == "evaluator" ? 0 : cluster.num_worker_replicas();
  config.num_ps_replicas = cluster.task.type == "evaluator" ? 0 : cluster.num_ps_replicas();
  return config;
}

RunConfig RunConfig::from_environment() {
  // A program's first call under TF_CONFIG: what it does next (join the other tasks) logs.
  ensure_logging();
  const char* text = std::getenv("TF_CONFIG");
  if (text != nullptr && *text != '\0') {
    ClusterConfig cluster = parse_tf_config(text);
    if (talks_to_other_tasks(cluster)) cluster.security = ClusterSecurity::from_environment();
    return for_cluster(cluster);
  }
  // Under Slurm (srun), the job step is the cluster.
  if (std::getenv("SLURM_PROCID") != nullptr && std::getenv("SLURM_NTASKS") != nullptr &&
      std::string(std::getenv("SLURM_NTASKS")) != "1") {
    std::map<std::string, std::string> env;
    for (const char* name : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST",
                             "SLURM_JOB_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
                             "SLURM_TASKS_PER_NODE", "CADRE_SLURM_JOBS", "CADRE_SLURM_PORT_BASE"}) {
      if (const char* value = std::getenv(name)) env[name] = value;
    }
    ClusterConfig cluster = cluster_from_slurm(env);
    if (talks_to_other_tasks(cluster)) cluster.security = ClusterSecurity::from_environment();
    return for_cluster(cluster);
  }
  return RunConfig();
}

std::shared_ptr<Env> RunConfig::file_system() const { return env ? env : posix_env(); }

double RunConfig::checkpoint_secs() const {
  if (save_checkpoints_steps) return 0;
  return save_checkpoints_secs.value_or(600);
}

void RunConfig::validate() const {
  auto fail = [](const std::string& field, const auto& value, std::string_view expected) {
    throw InvalidArgumentError(
        str_cat("RunConfig: ", field, " = ", value, " is invalid; expected ", expected));
  };
  if (save_checkpoints_steps && save_checkpoints_secs) {
    throw InvalidArgumentError(str_cat("RunConfig: save_checkpoints_steps (",
                                       *save_checkpoints_steps, ") and save_checkpoints_secs (",
                                       *save_checkpoints_secs, ") are both set; set one"));
  }
  if (save_checkpoints_steps && *save_checkpoints_steps <= 0) {
    fail("save_checkpoints_steps", *save_checkpoints_steps, "a positive number");
  }
  if (save_checkpoints_secs && *save_checkpoints_secs <= 0) {
    fail("save_checkpoints_secs", *save_checkpoints_secs, "a positive number");
  }
  std::error_code error;
  if (!model_dir.empty() && std::filesystem::exists(model_dir, error) &&
      !std::filesystem::is_directory(model_dir, error)) {
    fail("model_dir", model_dir, "a directory (or a path to create), not a file");
  }
  if (keep_checkpoint_max < 0) fail("keep_checkpoint_max", keep_checkpoint_max, ">= 0");
  if (input_shards < 0 || input_shards > io::kMaxInputShards) {
    fail("input_shards", input_shards, str_cat("0 (off) to ", io::kMaxInputShards));
  }
  if (keep_checkpoint_every_n_hours < 0) {
    fail("keep_checkpoint_every_n_hours", keep_checkpoint_every_n_hours, ">= 0");
  }
  if (!(checkpoint_durable_secs >= 0)) {
    fail("checkpoint_durable_secs", checkpoint_durable_secs, ">= 0 (0: fsync every checkpoint)");
  }
  if (log_step_count_steps <= 0) fail("log_step_count_steps", log_step_count_steps, "> 0");
  if (!(planned_stop.grace_secs > 0)) {
    fail("planned_stop.grace_secs", planned_stop.grace_secs, "a positive number of seconds");
  }
  for (int signal : planned_stop.signals) {
    if (signal <= 0 || signal >= NSIG || signal == SIGKILL || signal == SIGSTOP) {
      fail("planned_stop.signals", signal,
           "signals that can be caught (SIGTERM, SIGINT, SIGUSR1, ...)");
    }
  }
  if (save_summary_steps < 0) fail("save_summary_steps", save_summary_steps, ">= 0");
  if (profile_every_n_steps < 0) {
    fail("profile_every_n_steps", profile_every_n_steps, ">= 0 (0: no profile summaries)");
  }
  if (profile_trace_steps && (profile_trace_steps->first < 0 ||
                              profile_trace_steps->second <= profile_trace_steps->first)) {
    fail("profile_trace_steps",
         str_cat("[", profile_trace_steps->first, ", ", profile_trace_steps->second, ")"),
         "a window [first, last) of global steps with 0 <= first < last");
  }
  if (steps_per_unit <= 0) fail("steps_per_unit", steps_per_unit, "a positive number of steps");
  if (client_max_restarts < 0) fail("client_max_restarts", client_max_restarts, ">= 0");
  if (!(client_all_workers_lost_secs > 0)) {
    fail("client_all_workers_lost_secs", client_all_workers_lost_secs,
         "a positive number of seconds");
  }
  if (task_id < 0) fail("task_id", task_id, ">= 0");
  if (num_worker_replicas < 0) fail("num_worker_replicas", num_worker_replicas, ">= 0");
  if (num_ps_replicas < 0) fail("num_ps_replicas", num_ps_replicas, ">= 0");
}

}  // namespace cadre
