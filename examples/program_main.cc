#include "examples/program_main.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <exception>
#include <iostream>
#include <string>

namespace cadre::examples {

int program_main(int argc, char** argv, const char* usage, const std::function<int()>& run) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  std::string name = argv[0];
  name = name.substr(name.find_last_of('/') + 1);
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace cadre::examples
