// cadre_launch: a local cluster on free loopback ports (../shared/CONTRACTS.md).
//
//   cadre_launch --chief=1 --workers=1 --evaluator=1 [--max_restarts=2] -- PROGRAM ARGS...
//   cadre_launch --explain --chief=1 --workers=2 -- PROGRAM   (the TF_CONFIG of each task)
#include <gflags/gflags.h>

#include <cstdio>
#include <iostream>

#include "tools/cadre_launch/launcher.h"

DEFINE_int32(chief, 1, "chief tasks (0 or 1)");
DEFINE_int32(workers, 0, "worker tasks");
DEFINE_int32(ps, 0, "parameter-server tasks");
DEFINE_int32(evaluator, 0, "evaluator tasks (0 or 1)");
DEFINE_int32(max_restarts, 0, "restarts of the training tasks, together, after a failure");
DEFINE_bool(explain, false, "print each task's TF_CONFIG (with placeholder ports) and exit");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "cadre_launch --chief=1 --workers=N --ps=M --evaluator=1 [--max_restarts=R] -- PROGRAM "
      "ARGS...");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  cadre::launch::LaunchOptions options;
  options.chief = FLAGS_chief;
  options.workers = FLAGS_workers;
  options.ps = FLAGS_ps;
  options.evaluator = FLAGS_evaluator;
  options.max_restarts = FLAGS_max_restarts;
  for (int i = 1; i < argc; ++i) options.command.push_back(argv[i]);
  try {
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
