// cadre_ckpt: inspect, compare, verify and convert checkpoints, Cadre's and TensorFlow's.
//
//   cadre_ckpt ls PATH        global step, variables and bytes by part (PATH: file or model_dir)
//   cadre_ckpt diff A B       variables that differ
//   cadre_ckpt verify PATH    checks every checksum
//   cadre_ckpt convert PATH TF_PREFIX   writes PATH as a TensorFlow checkpoint
#include <iostream>
#include <string>

#include "examples/program_main.h"
#include "tools/cadre_ckpt/commands.h"

namespace {

int usage(std::ostream& out, int status) {
  out << "usage: cadre_ckpt ls PATH | diff A B | verify PATH | convert PATH TF_PREFIX\n"
         "  ls      the global step, each variable (name, dtype, shape), then the file's bytes\n"
         "          by part: variables, slots, input state, other\n"
         "  diff    variables that differ in presence, shape or value (max abs diff)\n"
         "  verify  checks every checksum; exit 1 naming the damaged dataset\n"
         "  convert writes PATH as the TensorFlow checkpoint TF_PREFIX (TF_PREFIX.index and\n"
         "          TF_PREFIX.data-00000-of-00001), under TensorFlow's names\n"
         "  PATH is a checkpoint file (model.ckpt-N.h5), a TensorFlow checkpoint's prefix\n"
         "  (model.ckpt-N) or a model_dir of either (its latest checkpoint)\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  cadre::examples::init_program_logging(argv[0]);  // the checkpoint library logs (warnings)
  if (argc < 2) return usage(std::cerr, 2);
  std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") return usage(std::cout, 0);
  try {
    if (command == "ls" && argc == 3) return cadre::tools::ckpt_ls(argv[2], std::cout, std::cerr);
    if (command == "diff" && argc == 4) {
      return cadre::tools::ckpt_diff(argv[2], argv[3], std::cout, std::cerr);
    }
    if (command == "convert" && argc == 4) {
      return cadre::tools::ckpt_convert(argv[2], argv[3], std::cout, std::cerr);
    }
    if (command == "verify" && argc == 3) {
      return cadre::tools::ckpt_verify(argv[2], std::cout, std::cerr);
    }
  } catch (const std::exception& error) {
    std::cerr << "cadre_ckpt " << command << ": " << error.what() << "\n";
    return 2;
  }
  return usage(std::cerr, 2);
}
