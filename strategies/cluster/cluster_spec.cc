#include "cadre/strategies/cluster_spec.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <set>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/cluster/validate.h"

namespace cadre {

namespace pb = google::protobuf;

std::string TaskId::to_string() const { return str_cat(type, ":", index); }

namespace {

const std::set<std::string>& known_jobs() {
  static const std::set<std::string> jobs{"chief", "worker", "ps", "evaluator", "client"};
  return jobs;
}

[[noreturn]] void bad(std::string_view field, std::string_view problem) {
  throw InvalidArgumentError(str_cat("TF_CONFIG: ", field, " ", problem));
}

std::string kind_of(const pb::Value& value) {
  switch (value.kind_case()) {
    case pb::Value::kNullValue:
      return "null";
    case pb::Value::kNumberValue:
      return "a number";
    case pb::Value::kStringValue:
      return str_cat("\"", value.string_value(), "\"");
    case pb::Value::kBoolValue:
      return "a boolean";
    case pb::Value::kStructValue:
      return "an object";
    case pb::Value::kListValue:
      return "a list";
    default:
      return "nothing";
  }
}

// "host:port" with a non-empty host (IPv6 in brackets) and a port in 1..65535.
void check_address(const std::string& field, const std::string& address) {
  size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  bool host_ok = !host.empty() && (host.front() != '[' || host.back() == ']') &&
                 (host.front() == '[' || host.find(':') == std::string::npos);
  bool port_ok = !port.empty() && port.size() <= 5 &&
                 port.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  if (!host_ok || !port_ok) {
    bad(field, str_cat("= \"", address, "\" is not host:port (a host, then a port in 1..65535)"));
  }
}

int task_index(const pb::Value& value) {
  double number = 0;
  if (value.kind_case() == pb::Value::kNumberValue) {
    number = value.number_value();
  } else if (value.kind_case() == pb::Value::kStringValue &&  // some launchers quote it
             !value.string_value().empty() &&
             value.string_value().find_first_not_of("0123456789") == std::string::npos) {
    number = std::stod(value.string_value());
  } else {
    bad("task.index", str_cat("= ", kind_of(value), " is not a task index (a whole number >= 0)"));
  }
  if (number < 0 || number != std::floor(number) || number > 1e6) {
    bad("task.index", str_cat("= ", number, " is not a task index (a whole number >= 0)"));
  }
  return static_cast<int>(number);
}

void read_dense_cluster(const pb::Struct& cluster, ClusterConfig* config) {
  for (const auto& [job, value] : cluster.fields()) {
    std::string field = str_cat("cluster.", job);
    if (!known_jobs().count(job)) {
      bad(field,
          str_cat("names an unknown task type; expected chief, worker, ps, evaluator or client"));
    }
    if (value.kind_case() != pb::Value::kListValue) {
      bad(field, str_cat("= ", kind_of(value), " is not a list of \"host:port\" addresses"));
    }
    int index = 0;
    for (const pb::Value& address : value.list_value().values()) {
      std::string item = str_cat(field, "[", index, "]");
      if (address.kind_case() != pb::Value::kStringValue) {
        bad(item, str_cat("= ", kind_of(address), " is not a \"host:port\" address"));
      }
      config->jobs[job][index++] = address.string_value();
    }
  }
}

void read_sparse_cluster(const pb::Struct& cluster, ClusterConfig* config) {
  for (const auto& [job, value] : cluster.fields()) {
    std::string field = str_cat("sparseCluster.", job);
    if (!known_jobs().count(job)) {
      bad(field, "names an unknown task type; expected chief, worker, ps, evaluator or client");
    }
    if (value.kind_case() != pb::Value::kStructValue) {
      bad(field, str_cat("= ", kind_of(value), " is not an object of index: \"host:port\""));
    }
    for (const auto& [key, address] : value.struct_value().fields()) {
      std::string item = str_cat(field, ".", key);
      if (key.empty() || key.size() > 6 ||
          key.find_first_not_of("0123456789") != std::string::npos) {
        bad(item, "is not a task index");
      }
      if (address.kind_case() != pb::Value::kStringValue) {
        bad(item, str_cat("= ", kind_of(address), " is not a \"host:port\" address"));
      }
      config->jobs[job][std::stoi(key)] = address.string_value();
    }
  }
}

}  // namespace

void validate_cluster(const ClusterConfig& config) {
  std::map<std::string, std::string> used;  // address -> the field that named it
  for (const auto& [job, tasks] : config.jobs) {
    for (const auto& [index, address] : tasks) {
      std::string field = str_cat("cluster.", job, "[", index, "]");
      check_address(field, address);
      auto [it, fresh] = used.emplace(address, field);
      if (!fresh) bad(field, str_cat("= \"", address, "\" is used twice: also by ", it->second));
    }
  }
  for (const char* single : {"chief", "evaluator", "client"}) {
    if (config.num_tasks(single) > 1) {
      bad(str_cat("cluster.", single),
          str_cat("has ", config.num_tasks(single), " tasks; a cluster has at most one ", single));
    }
  }
  if (config.has_job("client")) {
    // Coordinator mode (docs/DEPLOY.md): the client drives the workers and writes model_dir.
    if (config.has_job("chief")) {
      bad("cluster",
          "has a client and a chief: the client coordinates training and writes "
          "the checkpoints in place of a chief; list one of them");
    }
    if (!config.has_job("worker")) {
      bad("cluster",
          "has a client but no worker: the client dispatches training steps to "
          "workers; list them as \"worker\": [\"host:port\", ...]");
    }
  }
  const std::string& type = config.task.type;
  if (type.empty()) bad("task.type", "is missing; expected chief, worker, ps, evaluator or client");
  if (!known_jobs().count(type)) {
    bad("task.type",
        str_cat("= \"", type, "\" is unknown; expected chief, worker, ps, evaluator or client"));
  }
  if (type == "evaluator") {
    if (config.task.index != 0) {
      bad("task.index",
          str_cat("= ", config.task.index, " is out of range: there is one evaluator"));
    }
    return;  // the evaluator may be left out of the cluster
  }
  if (!config.has_job(type)) {
    bad("task.type", str_cat("= \"", type, "\" has no tasks in cluster (it lists: ",
                             config.jobs.empty() ? std::string("nothing") : [&] {
                               std::vector<std::string> names;
                               for (const auto& [job, tasks] : config.jobs) names.push_back(job);
                               return join(names);
                             }(),
                             ")"));
  }
  const auto& tasks = config.jobs.at(type);
  if (!tasks.count(config.task.index)) {
    bad("task.index",
        str_cat("= ", config.task.index, " is out of range: cluster.", type, " has ",
                config.num_tasks(type), " tasks",
                config.task.index < config.num_tasks(type) ? " (and no address for it)" : ""));
  }
  if (!config.has_job("chief") && !config.has_job("worker")) {
    bad("cluster", "has no chief and no worker: nothing would train");
  }
}

int ClusterConfig::num_tasks(const std::string& job) const {
  auto it = jobs.find(job);
  if (it == jobs.end() || it->second.empty()) return 0;
  return it->second.rbegin()->first + 1;
}

const std::string& ClusterConfig::address(const TaskId& id) const {
  auto job = jobs.find(id.type);
  if (job != jobs.end()) {
    auto it = job->second.find(id.index);
    if (it != job->second.end()) return it->second;
  }
  throw InvalidArgumentError(str_cat("the cluster has no address for task ", id.to_string()));
}

TaskId ClusterConfig::chief() const {
  if (has_job("client")) return {"client", 0};
  return has_job("chief") ? TaskId{"chief", 0} : TaskId{"worker", 0};
}

bool ClusterConfig::is_chief() const { return task == chief(); }

std::vector<TaskId> ClusterConfig::training_tasks() const {
  std::vector<TaskId> tasks;
  if (has_job("chief")) tasks.push_back({"chief", 0});
  for (int i = 0; i < num_tasks("worker"); ++i) tasks.push_back({"worker", i});
  return tasks;
}

int ClusterConfig::num_worker_replicas() const { return static_cast<int>(training_tasks().size()); }

int ClusterConfig::training_index(const TaskId& of) const {
  std::vector<TaskId> tasks = training_tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == of) return static_cast<int>(i);
  }
  return -1;
}

std::string ClusterConfig::explain() const {
  std::string out = str_cat("task:        ", task.to_string());
  if (task.type != "evaluator" || has_job("evaluator")) {
    if (jobs.count(task.type) && jobs.at(task.type).count(task.index)) {
      out += str_cat(" at ", address(task));
    }
  }
  std::string role;
  if (task.type == "evaluator") {
    role = "evaluator: follows the chief's checkpoints; not part of training";
  } else if (task.type == "ps") {
    role = "parameter server: holds variables for the workers";
  } else if (task.type == "client") {
    role = has_job("ps") ? "client: dispatches training steps to the workers, writes checkpoints"
                         : "client: starts and watches the workers' collective (worker 0 "
                           "writes checkpoints)";
  } else if (has_job("client")) {
    role = "worker: serves, running the steps the client dispatches";
  } else {
    role = str_cat(
        is_chief() ? "chief: trains, " : "worker: trains",
        is_chief() ? "hosts the coordination service, writes checkpoints and summaries" : "");
  }
  out += str_cat("\nrole:        ", role);
  TaskId boss = chief();
  out += str_cat("\nchief:       ", boss.to_string(), " at ", address(boss),
                 has_job("chief") || has_job("client")
                     ? ""
                     : " (no chief in the cluster: worker 0 acts as chief)");
  out += str_cat("\nglobal id:   ",
                 global_task_id() >= 0 ? std::to_string(global_task_id()) : std::string("none"),
                 " of ", num_worker_replicas(), " training tasks");
  out += "\npeers:";
  for (const auto& [job, tasks] : jobs) {
    for (const auto& [index, addr] : tasks) {
      TaskId id{job, index};
      if (id == task) continue;
      out += str_cat("\n  ", id.to_string(), " at ", addr);
    }
  }
  out += str_cat("\nrpc layer:   ", rpc_layer.empty() ? "grpc" : rpc_layer);
  return out;
}

ClusterConfig parse_tf_config(std::string_view json) {
  pb::Struct root;
  pb::util::JsonParseOptions options;
  auto status = pb::util::JsonStringToMessage(std::string(json), &root, options);
  if (!status.ok()) {
    throw InvalidArgumentError(
        str_cat("TF_CONFIG is not valid JSON (", status.message(), "): ", json.substr(0, 200)));
  }
  ClusterConfig config;
  const auto& fields = root.fields();
  if (auto it = fields.find("cluster"); it != fields.end()) {
    if (it->second.kind_case() != pb::Value::kStructValue) {
      bad("cluster", str_cat("= ", kind_of(it->second), " is not an object of job: [addresses]"));
    }
    read_dense_cluster(it->second.struct_value(), &config);
  }
  if (auto it = fields.find("sparseCluster"); it != fields.end()) {
    if (it->second.kind_case() != pb::Value::kStructValue) {
      bad("sparseCluster", str_cat("= ", kind_of(it->second), " is not an object"));
    }
    read_sparse_cluster(it->second.struct_value(), &config);
  }
  auto task = fields.find("task");
  if (task == fields.end() || task->second.kind_case() != pb::Value::kStructValue) {
    bad("task", "is missing or not an object like {\"type\": \"worker\", \"index\": 0}");
  }
  const auto& task_fields = task->second.struct_value().fields();
  if (auto it = task_fields.find("type"); it != task_fields.end()) {
    if (it->second.kind_case() != pb::Value::kStringValue) {
      bad("task.type", str_cat("= ", kind_of(it->second), " is not a task type"));
    }
    config.task.type = it->second.string_value();
  }
  if (auto it = task_fields.find("index"); it != task_fields.end()) {
    config.task.index = task_index(it->second);
  }
  for (const char* key : {"rpc_layer", "environment"}) {
    if (auto it = fields.find(key); it != fields.end()) {
      if (it->second.kind_case() != pb::Value::kStringValue) {
        bad(key, str_cat("= ", kind_of(it->second), " is not text"));
      }
      (std::string_view(key) == "rpc_layer" ? config.rpc_layer : config.environment) =
          it->second.string_value();
    }
  }
  if (!config.rpc_layer.empty() && config.rpc_layer != "grpc") {
    bad("rpc_layer", str_cat("= \"", config.rpc_layer, "\" is not supported; expected \"grpc\""));
  }
  validate_cluster(config);
  return config;
}

void check_no_ps(const ClusterConfig& config, std::string_view strategy) {
  if (config.num_ps_replicas() > 0) {
    throw InvalidArgumentError(str_cat("TF_CONFIG: cluster.ps has ", config.num_ps_replicas(),
                                       " tasks, but ", strategy,
                                       " is a collective strategy and uses no ps tasks"));
  }
}

}  // namespace cadre
