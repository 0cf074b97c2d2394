#include "examples/program_main.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/estimator/planned_stop.h"

namespace cadre::examples {

namespace {

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// glog's and gflags' flags are defined in their own source directories, which the flags
// every program has (logtostderr, flagfile) name.
std::set<std::string> library_flag_directories() {
  std::set<std::string> directories;
  for (const char* flag : {"logtostderr", "flagfile", "v", "tab_completion_word"}) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(flag, &info)) {
      directories.insert(directory_of(info.filename));
    }
  }
  return directories;
}

void print_program_help(const char* usage) {
  std::cout << usage << "\n\nFlags:\n";
  std::set<std::string> library = library_flag_directories();
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // sorted by file, then name
  for (const auto& flag : flags) {
    if (library.count(directory_of(flag.filename)) != 0) continue;
    std::string value =
        flag.type == "string" ? "\"" + flag.default_value + "\"" : flag.default_value;
    std::cout << "  --" << flag.name << "  " << flag.description << " (" << flag.type
              << ", default " << value << ")\n";
  }
  std::cout << "\n--helpfull also lists the logging flags (glog) and gflags' own.\n";
}

}  // namespace

void parse_program_flags(int* argc, char*** argv, const char* usage) {
  gflags::SetUsageMessage(usage);
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = (*argv)[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort" ||
        arg == "-helpshort") {
      print_program_help(usage);
      std::exit(0);
    }
  }
  gflags::ParseCommandLineFlags(argc, argv, true);
  init_program_logging((*argv)[0]);
}

void init_program_logging(const char* argv0) {
  if (FLAGS_log_dir.empty()) FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv0);
}

int program_main(int argc, char** argv, const char* usage, const std::function<int()>& run) {
  parse_program_flags(&argc, &argv, usage);
  std::string name = argv[0];
  name = name.substr(name.find_last_of('/') + 1);
  try {
    return run();
  } catch (const PlannedStopError& stop) {
    // Not a failure: what asked for the stop restarts the program, which resumes.
    std::cerr << name << ": " << stop.what() << "\n";
    return stop.exit_code();
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace cadre::examples
