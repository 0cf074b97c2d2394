// cadre_launch: a local cluster on free loopback ports (../shared/CONTRACTS.md).
//
//   cadre_launch --chief=1 --workers=1 --evaluator=1 [--max_restarts=2] -- PROGRAM ARGS...
//   cadre_launch --client=1 --workers=2 --ps=1 [--max_restarts=2] -- PROGRAM ARGS...
//   cadre_launch --explain --chief=1 --workers=2 -- PROGRAM   (the TF_CONFIG of each task)
//   cadre_launch --k8s_out=job.yaml --chief=1 --workers=2 --evaluator=1 -- PROGRAM ARGS...
//   cadre_launch --chief=1 --evaluator=1 --serve_args='--serve=DIR/export/latest' -- PROGRAM
//   ARGS...
//     (a model server beside the job: PROGRAM --serve=..., output prefixed [server:0])
#include <fcntl.h>
#include <gflags/gflags.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/base/random_token.h"
#include "examples/program_main.h"
#include "tools/cadre_launch/kubernetes_manifests.h"
#include "tools/cadre_launch/launcher.h"

DEFINE_int32(client, 0,
             "client tasks (0 or 1): coordinator mode, a client drives the workers in place of "
             "the chief (which then defaults to 0)");
DEFINE_int32(chief, 1, "chief tasks (0 or 1)");
DEFINE_int32(workers, 0, "worker tasks");
DEFINE_int32(ps, 0, "parameter-server tasks");
DEFINE_int32(evaluator, 0, "evaluator tasks (0 or 1)");
DEFINE_int32(max_restarts, 0,
             "restarts after a failure: of the training tasks (together, under collective "
             "strategies), and, at least 3, of the evaluator (alone); a planned stop "
             "(exit status 143) restarts a task without counting");
DEFINE_bool(elastic, false,
            "a worker killed by a signal restarts alone while the others step on (the "
            "program's --elastic: an elastic MultiWorkerMirrored group it rejoins)");
DEFINE_double(grace_secs, 25,
              "seconds between a planned stop's SIGTERM and SIGKILL, for the tasks' last "
              "checkpoint (Kubernetes: terminationGracePeriodSeconds)");
DEFINE_bool(tls, false,
            "mutual TLS between the tasks, with a CA and certificates made for this job");
DEFINE_bool(insecure, false,
            "no job secret: every process that reaches the tasks' ports is trusted");
DEFINE_string(serve_args, "",
              "also run a model server beside the job (task server:0, no TF_CONFIG): "
              "PROGRAM (or --serve_program) with these arguments, split at whitespace, e.g. "
              "'--serve=runs/fmnist/export/latest --model_name=fmnist'; stopped when the job "
              "ends; its exit status does not count");
DEFINE_string(serve_program, "", "the server's program (default: PROGRAM)");
DEFINE_bool(explain, false, "print each task's TF_CONFIG (with placeholder ports) and exit");
DEFINE_string(k8s_out, "", "write Kubernetes manifests for this cluster shape to FILE and exit");
DEFINE_string(k8s_kind, "jobs",
              "jobs (a headless Service and Indexed Jobs, no operator) or tfjob (Kubeflow)");
DEFINE_string(k8s_name, "cadre-job", "the job's name in the manifests (a DNS label)");
DEFINE_string(k8s_image, "cadre:latest", "the container image that holds PROGRAM");
DEFINE_int32(k8s_port, 2222, "every task's port");
DEFINE_string(k8s_mount_path, "/cadre",
              "where model_dir's volume is mounted (the working directory of every task)");
DEFINE_string(k8s_storage, "10Gi", "size of the ReadWriteMany claim made for model_dir");
DEFINE_string(k8s_volume_claim, "", "an existing claim for model_dir (then none is made)");
DEFINE_string(k8s_cpu, "", "CPU request per pod, e.g. 4 (empty: none)");
DEFINE_string(k8s_memory, "", "memory request and limit per pod, e.g. 8Gi (empty: none)");
DEFINE_int32(k8s_gpus, -1,
             "nvidia.com/gpu per training pod (-1: the gpu devices PROGRAM's --devices names)");

namespace {

// The job the flags describe; nullopt after naming a bad combination on stderr.
std::optional<cadre::launch::LaunchOptions> launch_options(int argc, char** argv) {
  cadre::launch::LaunchOptions options;
  options.client = FLAGS_client;
  options.chief = FLAGS_chief;
  // A client takes the chief's place: --client=1 alone means no chief.
  if (FLAGS_client == 1 && gflags::GetCommandLineFlagInfoOrDie("chief").is_default) {
    options.chief = 0;
  }
  options.workers = FLAGS_workers;
  options.ps = FLAGS_ps;
  options.evaluator = FLAGS_evaluator;
  options.max_restarts = FLAGS_max_restarts;
  options.elastic = FLAGS_elastic;
  options.grace_secs = FLAGS_grace_secs;
  if (FLAGS_tls && FLAGS_insecure) {
    std::cerr << "cadre_launch: --tls and --insecure: expected at most one of them\n";
    return std::nullopt;
  }
  using Security = cadre::launch::LaunchOptions::Security;
  options.security =
      FLAGS_tls ? Security::kTls : (FLAGS_insecure ? Security::kInsecure : Security::kSecret);
  for (int i = 1; i < argc; ++i) options.command.push_back(argv[i]);
  if (!FLAGS_serve_args.empty() || !FLAGS_serve_program.empty()) {
    std::string program = FLAGS_serve_program;
    if (program.empty() && !options.command.empty()) program = options.command[0];
    if (!program.empty()) options.server_command.push_back(program);
    std::istringstream words(FLAGS_serve_args);
    for (std::string word; words >> word;) options.server_command.push_back(word);
  }
  return options;
}

// --k8s_out: the manifests instead of a local cluster.
int write_manifests(const cadre::launch::LaunchOptions& options) {
  if (!options.server_command.empty()) {
    std::cerr << "cadre_launch: --serve_args is for a local cluster; on Kubernetes run the "
                 "server as a Deployment of its own\n";
    return 1;
  }
  cadre::launch::KubernetesOptions k8s;
  if (FLAGS_k8s_kind == "tfjob") {
    k8s.kind = cadre::launch::KubernetesOptions::Kind::kTFJob;
  } else if (FLAGS_k8s_kind != "jobs") {
    std::cerr << "cadre_launch: --k8s_kind=" << FLAGS_k8s_kind << ": expected jobs or tfjob\n";
    return 1;
  }
  k8s.name = FLAGS_k8s_name;
  k8s.image = FLAGS_k8s_image;
  k8s.port = FLAGS_k8s_port;
  k8s.mount_path = FLAGS_k8s_mount_path;
  k8s.storage_size = FLAGS_k8s_storage;
  k8s.volume_claim = FLAGS_k8s_volume_claim;
  k8s.cpu = FLAGS_k8s_cpu;
  k8s.memory = FLAGS_k8s_memory;
  k8s.gpus = FLAGS_k8s_gpus;
  k8s.secret = cadre::random_token();
  std::string text = cadre::launch::kubernetes_manifests(options, k8s);
  // The manifests hold the job's secret: readable by their owner only.
  int fd = ::open(FLAGS_k8s_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                 ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0 && ::close(fd) != 0) written = false;
  if (!written) {
    std::cerr << "cadre_launch: cannot write " << FLAGS_k8s_out << ": " << std::strerror(errno)
              << "\n";
    return 1;
  }
  std::printf("wrote %s\n", FLAGS_k8s_out.c_str());
  return 0;
}

// --explain: each task's TF_CONFIG (on example ports) and the server's command line.
int explain(const cadre::launch::LaunchOptions& options) {
  std::vector<int> ports;
  for (int i = 0; i < 8 + FLAGS_workers + FLAGS_ps; ++i) ports.push_back(20000 + i);
  for (const auto& [task, tf_config] : cadre::launch::tf_configs(options, ports)) {
    std::printf("%s: TF_CONFIG='%s'\n", task.c_str(), tf_config.c_str());
  }
  if (!options.server_command.empty()) {
    std::string line;
    for (const std::string& word : options.server_command) line += (line.empty() ? "" : " ") + word;
    std::printf("server:0: no TF_CONFIG; runs %s\n", line.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cadre::examples::parse_program_flags(
      &argc, &argv,
      "cadre_launch [--client=1 | --chief=1] --workers=N --ps=M --evaluator=1 "
      "[--max_restarts=R] -- PROGRAM ARGS...\n  a local cluster on loopback: one process per "
      "task, TF_CONFIG set for each");
  std::optional<cadre::launch::LaunchOptions> options = launch_options(argc, argv);
  if (!options) return 1;
  try {
    if (!FLAGS_k8s_out.empty()) return write_manifests(*options);
    if (FLAGS_explain) return explain(*options);
    return cadre::launch::run_cluster(*options);
  } catch (const std::exception& e) {
    std::cerr << "cadre_launch: " << e.what() << "\n";
    return 1;
  }
}
