// cadre_bench: throughput benchmarks whose last line of output is one JSON object.
//
//   cadre_bench train --model=mlp|cnn --batch_size=B [--steps=S] [--threads=T]

#include <iostream>
#include <map>
#include <string>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "examples/program_main.h"
#include "tools/cadre_bench/allreduce_bench.h"
#include "tools/cadre_bench/ckpt_bench.h"
#include "tools/cadre_bench/estimator_bench.h"
#include "tools/cadre_bench/input_bench.h"
#include "tools/cadre_bench/ps_bench.h"
#include "tools/cadre_bench/serve_bench.h"
#include "tools/cadre_bench/train_bench.h"

int main(int argc, char** argv) {
  cadre::examples::parse_program_flags(
      &argc, &argv,
      "cadre_bench SUBCOMMAND [flags]\n"
      "  train      training throughput of the Fashion-MNIST models (examples/sec)\n"
      "  input      the Fashion-MNIST input pipeline (elements/sec)\n"
      "  ckpt       checkpoint save and restore (MiB/s)\n"
      "  estimator  Estimator::train on Fashion-MNIST, checkpointing every --save_every steps\n"
      "  allreduce  Gloo all-reduce across TF_CONFIG's processes (GB/s)\n"
      "  ps         pulls and pushes to TF_CONFIG's ps tasks (per second, MiB/s)\n"
      "  serve      REST predict requests/s and latency against a running model server");
  const std::map<std::string, int (*)()> subcommands = {{"allreduce", cadre::bench::run_allreduce},
                                                        {"ckpt", cadre::bench::run_ckpt},
                                                        {"estimator", cadre::bench::run_estimator},
                                                        {"input", cadre::bench::run_input},
                                                        {"ps", cadre::bench::run_ps},
                                                        {"serve", cadre::bench::run_serve},
                                                        {"train", cadre::bench::run_train}};
  std::string name = argc > 1 ? argv[1] : "";
  auto it = subcommands.find(name);
  if (it == subcommands.end()) {
    std::vector<std::string> names;
    for (const auto& [n, fn] : subcommands) names.push_back(n);
    std::cerr << "cadre_bench: unknown subcommand '" << name
              << "'; expected one of: " << cadre::join(names) << "\n";
    return 2;
  }
  try {
    return it->second();
  } catch (const std::exception& e) {
    std::cerr << "cadre_bench " << name << ": " << e.what() << "\n";
    return 1;
  }
}
