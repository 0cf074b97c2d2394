// cadre_config: what a TF_CONFIG means for the process it is given to.
//
//   TF_CONFIG='{"cluster": {...}, "task": {...}}' cadre_config explain
//   cadre_config explain --tf_config='{"cluster": {...}, "task": {...}}'
//
// Prints the task, its role, the chief, the global id among the training tasks and the
// peers; a mistake in TF_CONFIG is one line naming the field and the value, and exit 1.
#include <gflags/gflags.h>

#include <cstdlib>
#include <iostream>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_spec.h"
#include "examples/program_main.h"

DEFINE_string(tf_config, "", "the TF_CONFIG to explain (default: the environment's)");

int main(int argc, char** argv) {
  cadre::examples::parse_program_flags(
      &argc, &argv, "cadre_config explain [--tf_config=JSON]: what TF_CONFIG resolves to");
  if (argc != 2 || std::string(argv[1]) != "explain") {
    std::cerr << "usage: cadre_config explain [--tf_config=JSON]\n";
    return 2;
  }
  std::string text = FLAGS_tf_config;
  if (text.empty()) {
    const char* env = std::getenv("TF_CONFIG");
    if (env == nullptr || *env == '\0') {
      std::cout << "no TF_CONFIG: local mode (one process trains and evaluates in turn)\n";
      return 0;
    }
    text = env;
  }
  try {
    std::cout << cadre::parse_tf_config(text).explain() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cadre_config: " << e.what() << "\n";
    return 1;
  }
}
