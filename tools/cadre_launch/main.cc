// cadre_launch: a local cluster on free loopback ports (../shared/CONTRACTS.md).
//
//   cadre_launch --chief=1 --workers=1 --evaluator=1 [--max_restarts=2] -- PROGRAM ARGS...
//   cadre_launch --explain --chief=1 --workers=2 -- PROGRAM   (the TF_CONFIG of each task)
//   cadre_launch --k8s_out=job.yaml --chief=1 --workers=2 --evaluator=1 -- PROGRAM ARGS...
#include <gflags/gflags.h>

#include <cstdio>
#include <iostream>

#include "examples/program_main.h"
#include "tools/cadre_launch/launcher.h"

DEFINE_int32(chief, 1, "chief tasks (0 or 1)");
DEFINE_int32(workers, 0, "worker tasks");
DEFINE_int32(ps, 0, "parameter-server tasks");
DEFINE_int32(evaluator, 0, "evaluator tasks (0 or 1)");
DEFINE_int32(max_restarts, 0, "restarts of the training tasks, together, after a failure");
DEFINE_bool(explain, false, "print each task's TF_CONFIG (with placeholder ports) and exit");
DEFINE_string(k8s_out, "", "write Kubernetes manifests for this cluster shape to FILE and exit");
DEFINE_string(k8s_name, "cadre-job", "the job's name in the manifests");
DEFINE_string(k8s_image, "cadre:latest", "the container image that holds PROGRAM");

int main(int argc, char** argv) {
  cadre::examples::parse_program_flags(
      &argc, &argv,
      "cadre_launch --chief=1 --workers=N --ps=M --evaluator=1 [--max_restarts=R] -- PROGRAM "
      "ARGS...\n  a local cluster on loopback: one process per task, TF_CONFIG set for each");
  cadre::launch::LaunchOptions options;
  options.chief = FLAGS_chief;
  options.workers = FLAGS_workers;
  options.ps = FLAGS_ps;
  options.evaluator = FLAGS_evaluator;
  options.max_restarts = FLAGS_max_restarts;
  for (int i = 1; i < argc; ++i) options.command.push_back(argv[i]);
  try {
    if (!FLAGS_k8s_out.empty()) {
      std::FILE* file = std::fopen(FLAGS_k8s_out.c_str(), "w");
      if (file == nullptr) {
        std::cerr << "cadre_launch: cannot write " << FLAGS_k8s_out << "\n";
        return 1;
      }
      std::string text =
          cadre::launch::kubernetes_manifests(options, FLAGS_k8s_name, FLAGS_k8s_image);
      std::fwrite(text.data(), 1, text.size(), file);
      std::fclose(file);
      std::printf("wrote %s\n", FLAGS_k8s_out.c_str());
      return 0;
    }
    if (FLAGS_explain) {
      std::vector<int> ports;
      for (int i = 0; i < 8 + FLAGS_workers + FLAGS_ps; ++i) ports.push_back(20000 + i);
      for (const auto& [task, tf_config] : cadre::launch::tf_configs(options, ports)) {
        std::printf("%s: TF_CONFIG='%s'\n", task.c_str(), tf_config.c_str());
      }
      return 0;
    }
    return cadre::launch::run_cluster(options);
  } catch (const std::exception& e) {
    std::cerr << "cadre_launch: " << e.what() << "\n";
    return 1;
  }
}
