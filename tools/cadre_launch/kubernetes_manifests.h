// Kubernetes manifests for a cadre_launch cluster shape (docs/DEPLOY.md): either plain
// Kubernetes objects, which need no operator, or a Kubeflow TFJob, whose operator sets
// TF_CONFIG itself. Both finish: every pod runs to completion (a ps task exits once the
// chief marks training finished), and restarts happen in place per the restart policy.
#pragma once

#include <string>

#include "tools/cadre_launch/launcher.h"

namespace cadre::launch {

struct KubernetesOptions {
  enum class Kind {
    kJobs,   // a headless Service and one Indexed Job per task type
    kTFJob,  // one kubeflow.org/v1 TFJob
  };
  Kind kind = Kind::kJobs;
  std::string name = "cadre-job";  // the Service, Jobs or TFJob; pods are <name>-<type>-<i>
  std::string image = "cadre:latest";
  int port = 2222;  // every task's; TFJob's default port
  // model_dir's storage, mounted at mount_path (the containers' working directory, so a
  // relative --model_dir lands in it): a ReadWriteMany PersistentVolumeClaim of
  // storage_size named <name>-model-dir, or the existing claim `volume_claim` when given.
  std::string mount_path = "/cadre";
  std::string storage_size = "10Gi";
  std::string volume_claim;
  // Requests per pod; empty: none. GPUs are limits (nvidia.com/gpu) and go to the training
  // tasks only; -1: as many as the program's --devices names gpu devices (else 0).
  std::string cpu;
  std::string memory;
  int gpus = -1;
  // The job's secret, in a Secret <name>-job-secret mounted into every pod (read through
  // CADRE_JOB_SECRET_FILE); with the cluster's Security::kInsecure, none and
  // CADRE_INSECURE=1. Required otherwise.
  std::string secret;
};

// YAML documents separated by "---". Throws InvalidArgumentError for a name that is not a
// DNS label, an empty command, a port out of range, a missing secret, or Security::kTls
// (certificates for pods come from the cluster's own CA: docs/SECURITY.md).
std::string kubernetes_manifests(const LaunchOptions& cluster, const KubernetesOptions& options);

// GPUs a pod of `cluster`'s program asks for: options.gpus, or the gpu devices its
// --devices flag names.
int gpus_per_pod(const LaunchOptions& cluster, const KubernetesOptions& options);

}  // namespace cadre::launch
