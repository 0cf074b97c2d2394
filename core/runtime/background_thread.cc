#include "core/runtime/background_thread.h"

#include <glog/logging.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cadre {

void make_background_thread(const char* name, int niceness) {
  ::pthread_setname_np(::pthread_self(), name);
  // For both calls, 0 and the thread id name this thread, not the whole process (Linux).
  sched_param param{};
  if (::sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    VLOG(1) << "could not make a background thread SCHED_BATCH: " << std::strerror(errno);
  }
  if (niceness <= 0) return;
  const auto thread = static_cast<id_t>(::gettid());
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, thread);
  if (errno == 0) ::setpriority(PRIO_PROCESS, thread, std::min(19, nice + niceness));
}

}  // namespace cadre
