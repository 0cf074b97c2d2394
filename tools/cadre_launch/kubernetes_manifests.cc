#include "tools/cadre_launch/kubernetes_manifests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::launch {

namespace {

struct Role {
  std::string type;  // client, chief, worker, ps, evaluator
  int count = 0;
  bool trains() const { return type == "chief" || type == "worker"; }
};

std::vector<Role> roles_of(const LaunchOptions& cluster) {
  std::vector<Role> roles;
  for (Role role : {Role{"client", cluster.client}, Role{"chief", cluster.chief},
                    Role{"worker", cluster.workers}, Role{"ps", cluster.ps},
                    Role{"evaluator", cluster.evaluator}}) {
    if (role.count > 0) roles.push_back(role);
  }
  return roles;
}

// A YAML double-quoted scalar.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

constexpr char kSecretDir[] = "/var/run/cadre/job-secret";

bool insecure(const LaunchOptions& cluster) {
  return cluster.security == LaunchOptions::Security::kInsecure;
}

std::string volume_claim_name(const KubernetesOptions& options) {
  return options.volume_claim.empty() ? options.name + "-model-dir" : options.volume_claim;
}

// The container of a task type: image, program, port, resources and model_dir's volume.
// `indent` spaces before "- name:"; `setup` (shell lines) runs before the program.
std::string container(const LaunchOptions& cluster, const KubernetesOptions& options,
                      const Role& role, const std::string& container_name,
                      const std::string& port_name, const std::string& setup, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  std::string in = pad + "  ";
  std::string out =
      str_cat(pad, "- name: ", container_name, "\n", in, "image: ", quoted(options.image), "\n", in,
              "workingDir: ", quoted(options.mount_path), "\n");
  if (setup.empty()) {
    out += str_cat(in, "command: [", quoted(cluster.command[0]), "]\n", in, "args:\n");
    for (size_t i = 1; i < cluster.command.size(); ++i) {
      out += str_cat(in, "  - ", quoted(cluster.command[i]), "\n");
    }
    if (cluster.command.size() == 1) out.replace(out.rfind("args:\n"), 6, "args: []\n");
  } else {
    // sh -c SCRIPT PROGRAM ARGS...: the script sets the environment, then execs "$0" "$@".
    out += str_cat(in, "command: [\"/bin/sh\", \"-c\"]\n", in, "args:\n", in, "  - |\n");
    for (size_t at = 0; at < setup.size();) {
      size_t newline = std::min(setup.find('\n', at), setup.size());
      out += str_cat(in, "    ", setup.substr(at, newline - at), "\n");
      at = newline + 1;
    }
    out += str_cat(in, "    exec \"$0\" \"$@\"\n");
    for (const std::string& arg : cluster.command) out += str_cat(in, "  - ", quoted(arg), "\n");
  }
  out += str_cat(in, "ports:\n", in, "  - name: ", port_name, "\n", in,
                 "    containerPort: ", options.port, "\n");
  out += str_cat(in, "env:\n");
  if (insecure(cluster)) {
    out += str_cat(in, "  - name: CADRE_INSECURE\n", in, "    value: \"1\"\n");
  } else {
    out += str_cat(in, "  - name: CADRE_JOB_SECRET_FILE\n", in, "    value: \"", kSecretDir,
                   "/secret\"\n");
  }
  int gpus = role.trains() ? gpus_per_pod(cluster, options) : 0;
  if (!options.cpu.empty() || !options.memory.empty() || gpus > 0) {
    out += str_cat(in, "resources:\n");
    if (!options.cpu.empty() || !options.memory.empty()) {
      out += str_cat(in, "  requests:\n");
      if (!options.cpu.empty()) out += str_cat(in, "    cpu: ", quoted(options.cpu), "\n");
      if (!options.memory.empty()) out += str_cat(in, "    memory: ", quoted(options.memory), "\n");
    }
    if (!options.memory.empty() || gpus > 0) {
      out += str_cat(in, "  limits:\n");
      if (!options.memory.empty()) out += str_cat(in, "    memory: ", quoted(options.memory), "\n");
      if (gpus > 0) out += str_cat(in, "    nvidia.com/gpu: ", gpus, "\n");
    }
  }
  out += str_cat(in, "volumeMounts:\n", in, "  - name: model-dir\n", in,
                 "    mountPath: ", quoted(options.mount_path), "\n");
  if (!insecure(cluster)) {
    out += str_cat(in, "  - name: job-secret\n", in, "    mountPath: \"", kSecretDir, "\"\n", in,
                   "    readOnly: true\n");
  }
  return out;
}

std::string volumes(const LaunchOptions& cluster, const KubernetesOptions& options, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  std::string out =
      str_cat(pad, "volumes:\n", pad, "  - name: model-dir\n", pad, "    persistentVolumeClaim:\n",
              pad, "      claimName: ", volume_claim_name(options), "\n");
  if (!insecure(cluster)) {
    out += str_cat(pad, "  - name: job-secret\n", pad, "    secret:\n", pad,
                   "      secretName: ", options.name, "-job-secret\n", pad,
                   "      defaultMode: 0400\n");
  }
  return out;
}

// The job's secret, which every task presents to the others' services.
std::string secret(const LaunchOptions& cluster, const KubernetesOptions& options) {
  if (insecure(cluster)) return "";
  return str_cat(
      "---\n# The job's secret: only pods holding it may call the tasks' services.\n"
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ",
      options.name, "-job-secret\ntype: Opaque\nstringData:\n  secret: ", quoted(options.secret),
      "\n");
}

// The services check the job's secret, but the collectives' data connections (Gloo's, NCCL's)
// authenticate nothing: only the job's own pods may connect to its pods, where the network
// plugin enforces NetworkPolicy.
std::string network_policy(const KubernetesOptions& options) {
  return str_cat(
      "---\n# Only the job's own pods may connect to them (the collectives' data connections\n"
      "# carry no credentials; see docs/SECURITY.md).\n"
      "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: ",
      options.name, "-job-only\nspec:\n  podSelector:\n    matchLabels:\n      app: ", options.name,
      "\n  policyTypes: [\"Ingress\"]\n  ingress:\n    - from:\n"
      "        - podSelector:\n            matchLabels:\n              app: ",
      options.name, "\n");
}

std::string claim(const KubernetesOptions& options) {
  if (!options.volume_claim.empty()) return "";
  return str_cat(
      "---\n# model_dir: every task reads and writes it (checkpoints, the evaluator's files).\n"
      "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: ",
      volume_claim_name(options), "\nspec:\n  accessModes: [\"ReadWriteMany\"]\n",
      "  resources:\n    requests:\n      storage: ", quoted(options.storage_size), "\n");
}

// Seconds from a pod's SIGTERM to its SIGKILL: the tasks' grace period and a margin for the
// process to exit after its checkpoint.
int grace_period(const LaunchOptions& cluster) {
  return static_cast<int>(std::ceil(cluster.grace_secs)) + 5;
}

// Plain Kubernetes: pods of an Indexed Job get the hostname <job>-<index> and, with the
// Service's name as subdomain, the DNS name <job>-<index>.<service>; JOB_COMPLETION_INDEX
// is the task index.
std::string indexed_jobs(const LaunchOptions& cluster, const KubernetesOptions& options) {
  std::vector<Role> roles = roles_of(cluster);
  std::string cluster_json;
  for (const Role& role : roles) {
    // Outside the cluster, as TensorFlow has it; with a client, inside, so that the client
    // leaves evaluation to it.
    if (role.type == "evaluator" && cluster.client == 0) continue;
    std::vector<std::string> addresses;
    for (int i = 0; i < role.count; ++i) {
      addresses.push_back(str_cat("\\\"", options.name, "-", role.type, "-", i, ".", options.name,
                                  ":", options.port, "\\\""));
    }
    if (!cluster_json.empty()) cluster_json += ", ";
    cluster_json += str_cat("\\\"", role.type, "\\\": [", join(addresses, ", "), "]");
  }
  std::string out = str_cat(
      "# Generated by cadre_launch --k8s_out: ", cluster.client ? "--client=1 " : "",
      "--chief=", cluster.chief, " --workers=", cluster.workers, " --ps=", cluster.ps,
      " --evaluator=", cluster.evaluator,
      " as plain Kubernetes objects\n# (a headless Service and one Indexed Job per task type).\n"
      "apiVersion: v1\nkind: Service\nmetadata:\n  name: ",
      options.name, "\n  labels:\n    app: ", options.name,
      "\nspec:\n  clusterIP: None  # headless: a DNS name per pod\n  selector:\n    app: ",
      options.name, "\n  ports:\n    - name: cadre\n      port: ", options.port, "\n");
  out += claim(options) + secret(cluster, options) + network_policy(options);
  for (const Role& role : roles) {
    std::string setup = str_cat("export TF_CONFIG=\"{\\\"cluster\\\": {", cluster_json,
                                "}, \\\"task\\\": {\\\"type\\\": \\\"", role.type,
                                "\\\", \\\"index\\\": $JOB_COMPLETION_INDEX}}\"");
    out += str_cat(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ", options.name, "-", role.type,
        "\n  labels:\n    app: ", options.name, "\n    task: ", role.type,
        "\nspec:\n  completionMode: Indexed  # one pod per task index\n  completions: ", role.count,
        "\n  parallelism: ", role.count,
        "  # every task at once: the chief waits for all\n  backoffLimit: ", cluster.max_restarts,
        "  # failed pods across the Job's indices\n"
        "  podFailurePolicy:  # replaced without counting: a planned stop's exit, an eviction\n"
        "    rules:\n      - action: Ignore\n        onExitCodes:\n          containerName: cadre\n"
        "          operator: In\n          values: [",
        kRestartExitCode,
        "]\n"
        "      - action: Ignore\n        onPodConditions:\n          - type: DisruptionTarget\n"
        "  template:\n    metadata:\n      labels:\n"
        "        app: ",
        options.name, "\n        task: ", role.type, "\n    spec:\n      subdomain: ", options.name,
        "\n      restartPolicy: Never  # a failed pod is replaced; a finished task stays finished\n"
        "      terminationGracePeriodSeconds: ",
        grace_period(cluster),
        "  # SIGTERM to SIGKILL: the last checkpoint\n"
        "      containers:\n",
        container(cluster, options, role, "cadre", "cadre", setup, 8),
        volumes(cluster, options, 6));
  }
  return out;
}

// Kubeflow's TFJob: the operator makes a Service per pod and sets TF_CONFIG (the evaluator
// outside the cluster); the job succeeds when the chief does, and the ps pods still running
// then are removed (cleanPodPolicy: Running).
std::string tfjob(const LaunchOptions& cluster, const KubernetesOptions& options) {
  std::string out = str_cat(
      "# Generated by cadre_launch --k8s_out --k8s_kind=tfjob: --chief=", cluster.chief,
      " --workers=", cluster.workers, " --ps=", cluster.ps, " --evaluator=", cluster.evaluator,
      " as a Kubeflow TFJob\n# (the training operator sets each pod's TF_CONFIG).\n"
      "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: ",
      options.name, "\nspec:\n  runPolicy:\n    cleanPodPolicy: Running\n    backoffLimit: ",
      cluster.max_restarts, "\n  tfReplicaSpecs:\n");
  for (const Role& role : roles_of(cluster)) {
    std::string type = role.type == "ps" ? "PS" : role.type;
    type[0] = static_cast<char>(std::toupper(type[0]));
    out +=
        str_cat("    ", type, ":\n      replicas: ", role.count,
                "\n      restartPolicy: ExitCode  # 128-255 (a planned stop's ", kRestartExitCode,
                ", a kill) retried; 1-127 not\n      template:\n        metadata:\n"
                "          labels:\n            app: ",
                options.name,
                "\n        spec:\n"
                "          terminationGracePeriodSeconds: ",
                grace_period(cluster),
                "\n"
                "          containers:\n",
                container(cluster, options, role, "tensorflow", "tfjob-port", "", 12),
                volumes(cluster, options, 10));
  }
  return out + claim(options) + secret(cluster, options) + network_policy(options);
}

}  // namespace

int gpus_per_pod(const LaunchOptions& cluster, const KubernetesOptions& options) {
  if (options.gpus >= 0) return options.gpus;
  int gpus = 0;
  for (const std::string& arg : cluster.command) {
    if (!arg.starts_with("--devices=")) continue;
    std::string devices = arg.substr(10);
    for (size_t at = devices.find("gpu"); at != std::string::npos;
         at = devices.find("gpu", at + 3)) {
      ++gpus;
    }
  }
  return gpus;
}

std::string kubernetes_manifests(const LaunchOptions& cluster, const KubernetesOptions& options) {
  if (!std::regex_match(options.name, std::regex("[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?"))) {
    throw InvalidArgumentError(str_cat("cadre_launch: --k8s_name=", options.name,
                                       ": expected a DNS label (lower-case letters, digits and "
                                       "'-', at most 42 characters)"));
  }
  if (cluster.command.empty()) {
    throw InvalidArgumentError("cadre_launch: no program given after --");
  }
  if (cluster.security == LaunchOptions::Security::kTls) {
    throw InvalidArgumentError(
        "cadre_launch: --tls with --k8s_out: pods need certificates for their DNS names from "
        "your cluster's CA (cert-manager, say) in CADRE_TLS_CA/CERT/KEY; see docs/SECURITY.md");
  }
  if (!insecure(cluster) && options.secret.empty()) {
    throw InvalidArgumentError("cadre_launch: the Kubernetes manifests need the job's secret");
  }
  if (options.port <= 0 || options.port > 65535) {
    throw InvalidArgumentError(
        str_cat("cadre_launch: port ", options.port, ": expected 1 to 65535"));
  }
  if (cluster.client > 0 && options.kind == KubernetesOptions::Kind::kTFJob) {
    throw InvalidArgumentError(
        "cadre_launch: --client with --k8s_kind=tfjob: Kubeflow's TFJob has no client replica "
        "type; use --k8s_kind=jobs, whose Indexed Jobs include one for the client");
  }
  return options.kind == KubernetesOptions::Kind::kTFJob ? tfjob(cluster, options)
                                                         : indexed_jobs(cluster, options);
}

}  // namespace cadre::launch
