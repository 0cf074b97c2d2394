// cadre_ckpt: inspect, compare and verify Cadre checkpoints.
//
//   cadre_ckpt ls PATH        global step, variables and bytes by part (PATH: file or model_dir)
//   cadre_ckpt diff A B       variables that differ
//   cadre_ckpt verify PATH    checks every checksum
#include <iostream>
#include <string>

#include "examples/program_main.h"
#include "tools/cadre_ckpt/commands.h"

namespace {

int usage(std::ostream& out, int status) {
  out << "usage: cadre_ckpt ls PATH | diff A B | verify PATH\n"
         "  ls      the global step, each variable (name, dtype, shape), then the file's bytes\n"
         "          by part: variables, slots, input state, other\n"
         "  diff    variables that differ in presence, shape or value (max abs diff)\n"
         "  verify  checks every checksum; exit 1 naming the damaged dataset\n"
         "  PATH is a checkpoint file (model.ckpt-N.h5) or a model_dir (its latest checkpoint)\n";
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
    if (command == "verify" && argc == 3) {
      return cadre::tools::ckpt_verify(argv[2], std::cout, std::cerr);
    }
  } catch (const std::exception& error) {
    std::cerr << "cadre_ckpt " << command << ": " << error.what() << "\n";
    return 2;
  }
  return usage(std::cerr, 2);
}
