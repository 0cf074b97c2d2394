// A cluster from Slurm's environment (TensorFlow's SlurmClusterResolver).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"
#include "core/base/strings.h"
#include "strategies/cluster/validate.h"

namespace cadre {

// More hosts than any cluster has: a node list or task count past it is a mistake (and must
// not cost the memory it claims).
constexpr size_t kMaxHosts = 1 << 16;

std::vector<std::string> expand_hostlist(const std::string& hostlist) {
  std::vector<std::string> hosts;
  auto fail = [&] {
    throw InvalidArgumentError(str_cat("Slurm node list '", hostlist,
                                       "' is malformed; expected e.g. node[01-03,07],gpu5"));
  };
  auto too_many = [&] {
    throw InvalidArgumentError(str_cat("Slurm node list '", hostlist.substr(0, 200),
                                       "' names more than ", kMaxHosts, " hosts"));
  };
  size_t at = 0;
  while (at < hostlist.size()) {
    size_t bracket = hostlist.find('[', at), comma = hostlist.find(',', at);
    if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
      std::string host =
          hostlist.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (host.empty()) fail();
      if (hosts.size() >= kMaxHosts) too_many();
      hosts.push_back(host);
      at = comma == std::string::npos ? hostlist.size() : comma + 1;
      continue;
    }
    size_t close = hostlist.find(']', bracket);
    if (close == std::string::npos) fail();
    std::string prefix = hostlist.substr(at, bracket - at);
    std::string ranges = hostlist.substr(bracket + 1, close - bracket - 1);
    size_t r = 0;
    while (r <= ranges.size()) {
      size_t end = ranges.find(',', r);
      std::string range = ranges.substr(r, end == std::string::npos ? std::string::npos : end - r);
      size_t dash = range.find('-');
      std::string lo = range.substr(0, dash),
                  hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      if (lo.empty() || hi.empty() || lo.size() > 9 || hi.size() > 9 ||
          lo.find_first_not_of("0123456789") != std::string::npos ||
          hi.find_first_not_of("0123456789") != std::string::npos ||
          std::stol(hi) < std::stol(lo)) {
        fail();
      }
      if (static_cast<size_t>(std::stol(hi) - std::stol(lo)) >= kMaxHosts - hosts.size()) {
        too_many();
      }
      for (long v = std::stol(lo); v <= std::stol(hi); ++v) {
        std::string digits = std::to_string(v);
        if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
        hosts.push_back(prefix + digits);
      }
      if (end == std::string::npos) break;
      r = end + 1;
    }
    at = close + 1;
    if (at < hostlist.size()) {
      if (hostlist[at] != ',') fail();
      ++at;
    }
  }
  return hosts;
}

namespace {

// CADRE_SLURM_JOBS ("chief:1,worker:2,evaluator:1"): task types in the order of
// SLURM_PROCID; default a chief and workers.
std::vector<std::pair<std::string, int>> slurm_jobs(const std::string& text, int ntasks) {
  if (text.empty()) return {{"chief", 1}, {"worker", ntasks - 1}};
  std::vector<std::pair<std::string, int>> jobs;
  int total = 0;
  for (size_t at = 0; at <= text.size();) {
    size_t comma = std::min(text.find(',', at), text.size());
    std::string item = text.substr(at, comma - at);
    size_t colon = item.find(':');
    std::string type = item.substr(0, colon);
    std::string count = colon == std::string::npos ? "" : item.substr(colon + 1);
    bool known = type == "chief" || type == "worker" || type == "ps" || type == "evaluator";
    if (!known || count.empty() || count.find_first_not_of("0123456789") != std::string::npos ||
        count.size() > 6 || std::stoi(count) <= 0) {
      throw InvalidArgumentError(str_cat("Slurm: CADRE_SLURM_JOBS = \"", text, "\": '", item,
                                         "' is not TYPE:COUNT with TYPE chief, worker, ps or "
                                         "evaluator and COUNT positive"));
    }
    jobs.emplace_back(type, std::stoi(count));
    total += jobs.back().second;
    if ((type == "chief" || type == "evaluator") && jobs.back().second > 1) {
      throw InvalidArgumentError(
          str_cat("Slurm: CADRE_SLURM_JOBS = \"", text, "\" has more than one ", type));
    }
    at = comma + 1;
  }
  if (total != ntasks) {
    throw InvalidArgumentError(str_cat("Slurm: CADRE_SLURM_JOBS = \"", text, "\" names ", total,
                                       " tasks but the job step has SLURM_NTASKS = ", ntasks));
  }
  return jobs;
}

}  // namespace

ClusterConfig cluster_from_slurm(const std::map<std::string, std::string>& env, int port_base) {
  auto get = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names) {
      if (auto it = env.find(name); it != env.end() && !it->second.empty()) return it->second;
    }
    throw InvalidArgumentError(str_cat("Slurm: ", *names.begin(), " is not set"));
  };
  auto number = [&](const char* name) {
    std::string text = get({name});
    if (text.find_first_not_of("0123456789") != std::string::npos) {
      throw InvalidArgumentError(str_cat("Slurm: ", name, " = \"", text, "\" is not a number"));
    }
    return std::stoi(text);
  };
  int procid = number("SLURM_PROCID"), ntasks = number("SLURM_NTASKS");
  if (auto it = env.find("CADRE_SLURM_PORT_BASE"); it != env.end() && !it->second.empty()) {
    port_base = number("CADRE_SLURM_PORT_BASE");
    if (port_base <= 0 || port_base > 65000) {
      throw InvalidArgumentError(str_cat("Slurm: CADRE_SLURM_PORT_BASE = ", port_base,
                                         "; expected a port from 1 to 65000"));
    }
  }
  auto jobs_text = env.find("CADRE_SLURM_JOBS");
  std::vector<std::pair<std::string, int>> jobs =
      slurm_jobs(jobs_text == env.end() ? "" : jobs_text->second, ntasks);
  std::vector<std::string> nodes =
      expand_hostlist(get({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}));
  std::string per_node_text = get({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  std::vector<int> per_node;  // "2(x3),1" -> 2 2 2 1
  size_t at = 0;
  while (at < per_node_text.size()) {
    size_t comma = per_node_text.find(',', at);
    std::string item =
        per_node_text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    int count = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &count, &repeat) < 1 || count <= 0 || repeat <= 0 ||
        static_cast<size_t>(repeat) > kMaxHosts - per_node.size()) {
      throw InvalidArgumentError(str_cat("Slurm: tasks per node '", per_node_text,
                                         "' is malformed; expected e.g. 2(x3),1"));
    }
    per_node.insert(per_node.end(), static_cast<size_t>(repeat), count);
    at = comma == std::string::npos ? per_node_text.size() : comma + 1;
  }
  if (per_node.size() != nodes.size()) {
    throw InvalidArgumentError(str_cat("Slurm: ", nodes.size(), " nodes but tasks per node for ",
                                       per_node.size(), " (", per_node_text, ")"));
  }
  std::vector<std::string> addresses;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int i = 0; i < per_node[n]; ++i)
      addresses.push_back(str_cat(nodes[n], ":", port_base + i));
  }
  if (static_cast<int>(addresses.size()) != ntasks || procid >= ntasks) {
    throw InvalidArgumentError(str_cat("Slurm: SLURM_NTASKS = ", ntasks,
                                       " and SLURM_PROCID = ", procid, " do not fit the ",
                                       addresses.size(), " tasks the node list places"));
  }
  // Tasks take the types in order of SLURM_PROCID; the evaluator stays outside the cluster,
  // as TensorFlow has it.
  ClusterConfig config;
  size_t task = 0;
  for (const auto& [type, count] : jobs) {
    for (int index = 0; index < count; ++index, ++task) {
      if (type != "evaluator") config.jobs[type][index] = addresses[task];
      if (static_cast<int>(task) == procid) config.task = TaskId{type, index};
    }
  }
  validate_cluster(config);
  return config;
}

}  // namespace cadre
