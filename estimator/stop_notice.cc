#include "estimator/stop_notice.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>

namespace cadre::estimator_internal {
namespace {

// The first notice signal received (0 before), and when, on CLOCK_MONOTONIC.
std::atomic<int> g_notice{0};
std::atomic<int64_t> g_notice_ns{0};

int64_t monotonic_ns() {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

void on_notice(int signal) {
  int none = 0;
  if (g_notice.compare_exchange_strong(none, signal)) {
    g_notice_ns = monotonic_ns();
  } else {
    // A second notice: the signal's default action, now (both calls are async-signal-safe).
    ::signal(signal, SIG_DFL);
    ::raise(signal);
  }
}

// The actions the handlers replaced, per signal, while any StopNotice lives.
std::mutex g_mutex;
int g_users = 0;
std::map<int, struct sigaction> g_previous;

}  // namespace

StopNotice::StopNotice(const PlannedStopOptions& options)
    : options_(options), next_look_(std::chrono::steady_clock::now()) {
  if (options_.signals.empty()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_users++ == 0) {
    for (int signal : options_.signals) {
      struct sigaction action {};
      action.sa_handler = on_notice;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;  // system calls in flight go on: the step finishes
      struct sigaction previous {};
      if (::sigaction(signal, &action, &previous) == 0) g_previous[signal] = previous;
    }
  }
  installed_ = true;
}

StopNotice::~StopNotice() {
  if (!installed_) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_users == 0) {
    for (const auto& [signal, previous] : g_previous) ::sigaction(signal, &previous, nullptr);
    g_previous.clear();
  }
}

bool StopNotice::requested() {
  if (g_notice.load() != 0) return true;
  if (options_.notice_file.empty() || file_seen_) return file_seen_;
  auto now = std::chrono::steady_clock::now();
  if (now < next_look_) return false;
  next_look_ = now + std::chrono::milliseconds(500);
  struct stat info {};
  file_seen_ = ::stat(options_.notice_file.c_str(), &info) == 0;
  if (file_seen_) file_seen_ns_ = monotonic_ns();
  return file_seen_;
}

double StopNotice::seconds_since_notice() const {
  int64_t at = g_notice.load() != 0 ? g_notice_ns.load() : file_seen_ns_;
  return at == 0 ? 0 : static_cast<double>(monotonic_ns() - at) * 1e-9;
}

std::string StopNotice::reason() const {
  if (int signal = g_notice.load(); signal != 0) {
    const char* name = ::sigabbrev_np(signal);
    return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
  }
  if (file_seen_) return "the notice file " + options_.notice_file;
  return "";
}

namespace {

std::terminate_handler g_previous_terminate = nullptr;

void terminate_after_planned_stop() {
  if (std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const PlannedStopError& stop) {
      std::fprintf(stderr, "%s\n", stop.what());
      std::fflush(nullptr);
      std::_Exit(stop.exit_code());
    } catch (...) {
    }
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

}  // namespace

void throw_planned_stop(const std::string& message, int64_t step) {
  static std::once_flag installed;
  std::call_once(installed,
                 [] { g_previous_terminate = std::set_terminate(terminate_after_planned_stop); });
  throw PlannedStopError(message, step);
}

}  // namespace cadre::estimator_internal
