// The Kubernetes manifests cadre_launch --k8s_out writes: the invariants that make a job
// finish (Indexed Jobs, one pod per task index, a failed pod replaced, a planned stop or an
// eviction retried without counting, no StatefulSet), a
// TF_CONFIG per pod that resolves to its role, storage for model_dir, resources; and the
// TFJob, whose TF_CONFIG the Kubeflow operator builds. tools/compat/k8s_models_check.py
// also loads both into the official Kubernetes and Kubeflow models (docs/DEPLOY.md).
#include "tools/cadre_launch/kubernetes_manifests.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"
#include "tests/support/processes.h"

namespace cadre {
namespace {

std::vector<std::string> documents(const std::string& yaml) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    size_t next = yaml.find("---\n", at);
    out.push_back(yaml.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return out;
    at = next + 4;
  }
}

// The first value of `key: value` in `doc`.
std::string field(const std::string& doc, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(doc, m, std::regex("\n *" + key + ": ([^\n#]*?) *(#[^\n]*)?\n"))) {
    return "";
  }
  return m[1];
}

// Runs the container's shell setup with JOB_COMPLETION_INDEX=index; returns its TF_CONFIG.
std::string tf_config_of_pod(const std::string& job, int index) {
  size_t begin = job.find("- |\n") + 4;
  size_t end = job.rfind('\n', job.find("exec \"$0\"", begin)) + 1;
  std::string script;
  for (size_t at = begin; at < end;) {  // drop the YAML indentation
    size_t newline = job.find('\n', at);
    std::string line = job.substr(at, newline - at);
    script += line.substr(line.find_first_not_of(' ')) + "\n";
    at = newline + 1;
  }
  return testing::run_command("JOB_COMPLETION_INDEX=" + std::to_string(index) + " sh -c '" +
                              script + "echo \"$TF_CONFIG\"'")
      .output;
}

launch::LaunchOptions shape() {
  launch::LaunchOptions cluster;
  cluster.chief = 1;
  cluster.workers = 2;
  cluster.ps = 1;
  cluster.evaluator = 1;
  cluster.max_restarts = 3;
  cluster.command = {"/opt/cadre/bin/fashion_mnist", "--model_dir=runs/fm",
                     "--strategy=parameter_server", "--devices=gpu:0,gpu:1"};
  return cluster;
}

// One task type's Indexed Job: its pods, restart policy, volumes and TF_CONFIGs.
void expect_indexed_job(const std::string& job, const std::string& type, int count) {
  EXPECT_EQ(field(job, "name"), "fm-" + type);
  EXPECT_EQ(field(job, "completionMode"), "Indexed");
  EXPECT_EQ(field(job, "completions"), std::to_string(count));
  EXPECT_EQ(field(job, "parallelism"), std::to_string(count));
  EXPECT_EQ(field(job, "backoffLimit"), "3");
  EXPECT_EQ(field(job, "restartPolicy"), "Never") << "podFailurePolicy needs it";
  // A planned stop's exit and an eviction replace the pod without using up backoffLimit,
  // and the pod has the tasks' grace period and a margin to save its last checkpoint.
  EXPECT_NE(job.find("  podFailurePolicy:"), std::string::npos);
  EXPECT_NE(job.find("      - action: Ignore\n        onExitCodes:\n          containerName: "
                     "cadre\n          operator: In\n          values: [143]\n"),
            std::string::npos);
  EXPECT_NE(job.find("          - type: DisruptionTarget\n"), std::string::npos);
  EXPECT_EQ(field(job, "terminationGracePeriodSeconds"), "30");
  EXPECT_EQ(field(job, "subdomain"), "fm") << "pods resolve as <job>-<index>.<service>";
  EXPECT_EQ(field(job, "claimName"), "fm-model-dir");
  EXPECT_EQ(field(job, "mountPath"), "\"/cadre\"");
  EXPECT_EQ(field(job, "workingDir"), "\"/cadre\"");
  EXPECT_EQ(field(job, "cpu"), "\"4\"");
  EXPECT_EQ(field(job, "secretName"), "fm-job-secret");
  EXPECT_NE(job.find("- name: CADRE_JOB_SECRET_FILE\n"), std::string::npos);
  bool trains = type == "chief" || type == "worker";
  EXPECT_EQ(field(job, "nvidia.com/gpu"), trains ? "2" : "") << "GPUs from --devices";
  for (int index = 0; index < count; ++index) {
    ClusterConfig config = parse_tf_config(tf_config_of_pod(job, index));
    EXPECT_EQ(config.task.type, type);
    EXPECT_EQ(config.task.index, index);
    EXPECT_EQ(config.num_worker_replicas(), 3);
    EXPECT_EQ(config.num_ps_replicas(), 1);
    // An Indexed Job's pod is named <job>-<index>: its address in every TF_CONFIG.
    if (type != "evaluator") {
      EXPECT_EQ(config.address({type, index}),
                "fm-" + type + "-" + std::to_string(index) + ".fm:2222");
    }
  }
}

TEST(KubernetesManifestsTest, IndexedJobsFinishAndGiveEveryPodItsRole) {
  launch::KubernetesOptions options;
  options.secret = "a job secret";
  options.name = "fm";
  options.cpu = "4";
  options.memory = "8Gi";
  std::string yaml = launch::kubernetes_manifests(shape(), options);
  EXPECT_EQ(yaml.find("StatefulSet"), std::string::npos) << "restarts pods that succeeded";
  std::map<std::string, std::string> jobs;
  bool service = false, claim = false, secret = false, policy = false;
  for (const std::string& doc : documents(yaml)) {
    std::string kind = field(doc, "kind");
    if (kind == "Service") {
      service = true;
      EXPECT_EQ(field(doc, "clusterIP"), "None");
      EXPECT_EQ(field(doc, "name"), "fm");
    } else if (kind == "PersistentVolumeClaim") {
      claim = true;
      EXPECT_NE(doc.find("ReadWriteMany"), std::string::npos);
      EXPECT_EQ(field(doc, "name"), "fm-model-dir");
    } else if (kind == "Secret") {
      secret = true;
      EXPECT_EQ(field(doc, "name"), "fm-job-secret");
      EXPECT_EQ(field(doc, "secret"), "\"a job secret\"");
    } else if (kind == "NetworkPolicy") {
      policy = true;
      EXPECT_NE(doc.find("podSelector:\n    matchLabels:\n      app: fm\n"), std::string::npos);
      EXPECT_NE(doc.find("- from:\n        - podSelector:\n            matchLabels:\n"
                         "              app: fm\n"),
                std::string::npos);
    } else if (kind == "Job") {
      jobs[field(doc, "task")] = doc;
    }
  }
  EXPECT_TRUE(service);
  EXPECT_TRUE(claim);
  EXPECT_TRUE(secret) << "every pod presents the job's secret";
  EXPECT_TRUE(policy) << "only the job's pods reach its collectives' ports";
  ASSERT_EQ(jobs.size(), 4u);
  const std::map<std::string, int> counts = {
      {"chief", 1}, {"worker", 2}, {"ps", 1}, {"evaluator", 1}};
  for (const auto& [type, count] : counts) {
    SCOPED_TRACE(type);
    expect_indexed_job(jobs.at(type), type, count);
  }
}

// Coordinator mode: an Indexed Job for the client, in every pod's cluster in place of a
// chief, with the evaluator listed so that the client leaves evaluation to it; the client
// pod asks for no GPU. Kubeflow's TFJob has no client replica type: refused, saying so.
TEST(KubernetesManifestsTest, AClientJobDrivesTheWorkers) {
  launch::LaunchOptions cluster = shape();
  cluster.chief = 0;
  cluster.client = 1;
  launch::KubernetesOptions options;
  options.secret = "a job secret";
  options.name = "fm";
  std::map<std::string, std::string> jobs;
  for (const std::string& doc : documents(launch::kubernetes_manifests(cluster, options))) {
    if (field(doc, "kind") == "Job") jobs[field(doc, "task")] = doc;
  }
  ASSERT_EQ(jobs.size(), 4u);
  ASSERT_TRUE(jobs.count("client"));
  EXPECT_EQ(field(jobs.at("client"), "nvidia.com/gpu"), "");
  for (const auto& [type, job] : jobs) {
    ClusterConfig config = parse_tf_config(tf_config_of_pod(job, 0));
    EXPECT_EQ(config.task.type, type);
    EXPECT_EQ(config.chief().to_string(), "client:0");
    EXPECT_EQ(config.address({"client", 0}), "fm-client-0.fm:2222");
    EXPECT_TRUE(config.has_job("evaluator"));
    EXPECT_EQ(config.num_worker_replicas(), 2);
  }
  options.kind = launch::KubernetesOptions::Kind::kTFJob;
  try {
    launch::kubernetes_manifests(cluster, options);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no client replica type"), std::string::npos);
  }
}

TEST(KubernetesManifestsTest, AnExistingClaimAndExplicitGpus) {
  launch::KubernetesOptions options;
  options.secret = "a job secret";
  options.volume_claim = "shared";
  options.gpus = 0;
  std::string yaml = launch::kubernetes_manifests(shape(), options);
  EXPECT_EQ(yaml.find("kind: PersistentVolumeClaim"), std::string::npos);
  EXPECT_EQ(field(yaml, "claimName"), "shared");
  EXPECT_EQ(yaml.find("nvidia.com/gpu"), std::string::npos);
  options.name = "Not_A_Label";
  EXPECT_THROW(launch::kubernetes_manifests(shape(), options), InvalidArgumentError);
}

// Open by choice only: no secret is an error, --insecure says so in every pod, and TLS needs
// certificates from the cluster's own CA.
TEST(KubernetesManifestsTest, TheSecretIsRequiredUnlessInsecure) {
  launch::KubernetesOptions options;
  EXPECT_THROW(launch::kubernetes_manifests(shape(), options), InvalidArgumentError);
  launch::LaunchOptions open = shape();
  open.security = launch::LaunchOptions::Security::kInsecure;
  std::string yaml = launch::kubernetes_manifests(open, options);
  EXPECT_EQ(yaml.find("kind: Secret"), std::string::npos);
  EXPECT_NE(yaml.find("- name: CADRE_INSECURE\n"), std::string::npos);
  launch::LaunchOptions tls = shape();
  tls.security = launch::LaunchOptions::Security::kTls;
  options.secret = "s";
  EXPECT_THROW(launch::kubernetes_manifests(tls, options), InvalidArgumentError);
}

// The TFJob's replicas, and the TF_CONFIG Kubeflow's operator gives each pod: the cluster
// without the evaluator, addresses <job>-<type>-<i>.<namespace>.svc:<port>, and an
// "environment" field.
TEST(KubernetesManifestsTest, TheTFJobResolvesTheOperatorsTfConfig) {
  launch::KubernetesOptions options;
  options.secret = "a job secret";
  options.kind = launch::KubernetesOptions::Kind::kTFJob;
  options.name = "fm";
  std::string yaml = launch::kubernetes_manifests(shape(), options);
  EXPECT_EQ(field(yaml, "kind"), "TFJob");
  EXPECT_EQ(field(yaml, "apiVersion"), "kubeflow.org/v1");
  EXPECT_EQ(field(yaml, "cleanPodPolicy"), "Running");
  EXPECT_NE(yaml.find("kind: NetworkPolicy\n"), std::string::npos);
  for (const auto& [replica, count] : std::vector<std::pair<std::string, int>>{
           {"Chief", 1}, {"Worker", 2}, {"PS", 1}, {"Evaluator", 1}}) {
    size_t at = yaml.find("    " + replica + ":\n");
    ASSERT_NE(at, std::string::npos) << replica;
    std::string spec = yaml.substr(at);
    EXPECT_EQ(field(spec, "replicas"), std::to_string(count)) << replica;
    // 128-255 retried (a planned stop's 143), 1-127 (a bad flag) not.
    EXPECT_EQ(field(spec, "restartPolicy"), "ExitCode") << replica;
    EXPECT_EQ(field(spec, "terminationGracePeriodSeconds"), "30") << replica;
    EXPECT_EQ(field(spec, "- name"), "tensorflow") << "the operator's default container";
    EXPECT_NE(spec.find("- name: tfjob-port"), std::string::npos) << "the operator's port name";
    EXPECT_NE(spec.find("metadata:\n          labels:\n            app: fm\n"), std::string::npos)
        << "the pods the NetworkPolicy admits";
  }
  std::string cluster =
      R"("cluster":{"chief":["fm-chief-0.default.svc:2222"],)"
      R"("ps":["fm-ps-0.default.svc:2222"],)"
      R"("worker":["fm-worker-0.default.svc:2222","fm-worker-1.default.svc:2222"]})";
  for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
           {"chief", 0}, {"worker", 1}, {"ps", 0}, {"evaluator", 0}}) {
    ClusterConfig config =
        parse_tf_config("{" + cluster + R"(,"task":{"type":")" + type + R"(","index":)" +
                        std::to_string(index) + R"(},"environment":"cloud"})");
    EXPECT_EQ(config.task.type, type);
    EXPECT_EQ(config.task.index, index);
    EXPECT_EQ(config.num_worker_replicas(), 3);
  }
}

}  // namespace
}  // namespace cadre
