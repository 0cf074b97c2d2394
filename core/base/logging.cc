#include "core/base/logging.h"

#include <errno.h>
#include <glog/logging.h>

#include <mutex>

namespace cadre {

void ensure_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (google::IsGoogleLoggingInitialized()) return;
    FLAGS_logtostderr = true;  // CONTRACTS.md: programs log to stderr unless given --log_dir
    // glog keeps the pointer: glibc's copy of the program name lives as long as the process.
    google::InitGoogleLogging(program_invocation_short_name);
  });
}

}  // namespace cadre
