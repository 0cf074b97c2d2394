// The main() the example programs and tools share: flags, glog to stderr, and any error as
// one line "<program>: <message>" on stderr with exit status 1 (CONTRACTS.md: no trace, no
// abort); a planned stop (PlannedStopError) as one line with kRestartExitCode.
#pragma once

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace cadre::examples {

// gflags' parsing, except that --help (also -h, --helpshort) prints `usage` and the program's
// own flags only, then exits 0; --helpfull lists glog's and gflags' flags as well. Then
// init_program_logging, so that nothing the program does logs before glog is set up.
void parse_program_flags(int* argc, char*** argv, const char* usage);

// glog as every program has it (CONTRACTS.md): to stderr, or to files in --log_dir when that
// is given (errors then to stderr too), under the program's name. Call it once, before
// anything logs; parse_program_flags does.
void init_program_logging(const char* argv0);

// Unless `ok`: std::invalid_argument "--name=value: expected <expected>", which
// program_main prints as the program's one line of error.
template <typename T>
void check_flag(bool ok, std::string_view name, const T& value, std::string_view expected) {
  if (ok) return;
  std::ostringstream text;
  text << "--" << name << "=" << value << ": expected " << expected;
  throw std::invalid_argument(text.str());
}

// parse_program_flags (glog included), then run() with every exception turned into one line.
int program_main(int argc, char** argv, const char* usage, const std::function<int()>& run);

}  // namespace cadre::examples
