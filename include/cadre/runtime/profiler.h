// The profiler: where the time of a training step goes.
//
// Code marks spans of time with a profiler::Scope; every kernel call and every gradient
// function is one (core), as are the phases of a training step (the Estimator). While a
// ProfilerSession is recording, each scope appends (name, category, start, duration) to a
// buffer of its own thread; collect() takes them out. While none is, a scope costs a call
// to enabled() and a branch, so profiling stays compiled in.
//
//   auto session = profiler::ProfilerSession::start();
//   { profiler::Scope scope("my_loss", "user"); ... }
//   profiler::Profile profile = session->collect();
//   std::string json = profiler::chrome_trace_json(profile);   // chrome://tracing, Perfetto
//
// The Estimator drives a session from RunConfig::profile_every_n_steps and
// RunConfig::profile_trace_steps (ProfilerHook); a custom loop drives its own.
//
// Thread safety: scopes may open and close on any thread at any time; a ProfilerSession's
// methods are called from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cadre::profiler {

// The categories the framework records under (a trace viewer colours and filters by them).
inline constexpr std::string_view kStep = "step";    // one training step, hooks included
inline constexpr std::string_view kPhase = "phase";  // input, forward, backward, update, ...
inline constexpr std::string_view kOp = "op";        // one kernel call, named by its kernel
inline constexpr std::string_view kGrad = "grad";    // one gradient function of the tape
inline constexpr std::string_view kUser = "user";

// Whether a session is recording: one relaxed atomic load.
bool enabled();
// The profiler's clock: steady, in nanoseconds. Spans are measured on it; a session's events
// come out relative to its origin_ns().
int64_t now_ns();
// Appends the span [start_ns, end_ns) of now_ns()'s clock to the calling thread's events
// while a session records, and does nothing otherwise: what a Scope does when it closes, for
// a span that no scope brackets (one that opens and closes in different calls). `name` and
// `category` must outlive the session, as a Scope's must.
void record(std::string_view name, std::string_view category, int64_t start_ns, int64_t end_ns);

// A string with the lifetime of the process, equal to `text`: scopes keep names by view,
// so a name built at run time goes through here (once per distinct name; takes a lock).
std::string_view intern(std::string_view text);

// The name this thread's events carry in a trace (default: the thread's system name and
// id). Cheap; may be called whether or not a session records.
void set_thread_name(std::string_view name);

// Records the time from construction to destruction when a session was recording at
// construction. `name` and `category` must outlive the session that records them: string
// literals, names of kernels, or intern()'s result. Not copyable; use on one thread.
class Scope {
 public:
  Scope(std::string_view name, std::string_view category = kUser) {
    if (enabled()) [[unlikely]] {
      name_ = name;
      category_ = category;
      start_ns_ = now_ns();
    }
  }
  ~Scope() {
    if (start_ns_ >= 0) [[unlikely]]
      record(name_, category_, start_ns_, now_ns());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::string_view name_;
  std::string_view category_;
  int64_t start_ns_ = -1;
};

// Consecutive phases of one piece of code: each next() ends the current phase and starts
// another; destruction ends the last.
//
//   profiler::Phases phase("forward");
//   ...; phase.next("backward"); ...; phase.next("update"); ...
class Phases {
 public:
  explicit Phases(std::string_view first) { next(first); }
  ~Phases() { end(); }
  void next(std::string_view name) {
    end();
    if (enabled()) [[unlikely]] {
      name_ = name;
      start_ns_ = now_ns();
    }
  }
  Phases(const Phases&) = delete;
  Phases& operator=(const Phases&) = delete;

 private:
  void end() {
    if (start_ns_ < 0) [[likely]]
      return;
    record(name_, kPhase, start_ns_, now_ns());
    start_ns_ = -1;
  }
  std::string_view name_;
  int64_t start_ns_ = -1;
};

// One recorded span. Names and categories are views of strings that live as long as the
// process (see Scope).
struct Event {
  std::string_view name;
  std::string_view category;
  int tid = 0;           // the recording thread's system id
  int64_t start_ns = 0;  // since the session's origin
  int64_t duration_ns = 0;
};

// Events taken out of a session, ordered by thread, then by start (an enclosing event
// before those it contains).
struct Profile {
  std::vector<Event> events;
  std::map<int, std::string> thread_names;  // by tid, for every thread with an event
  int64_t origin_unix_us = 0;               // wall-clock time of the session's origin
  int pid = 0;                              // the recording process
  // Events not kept: a thread keeps at most 2^18 between two collects.
  int64_t dropped_events = 0;
  void append(Profile other);  // merges `other`'s events and names in order
};

// Records every Scope of the process while it lives. At most one session records at a time.
class ProfilerSession {
 public:
  // Starts recording; throws FailedPreconditionError when another session is recording.
  static std::unique_ptr<ProfilerSession> start();
  // Stops recording and drops what was not collected.
  ~ProfilerSession();
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

  // Everything recorded since start() or the previous collect(), removed from the buffers.
  // Scopes still open are not in it yet.
  Profile collect();
  // The session's origin, on now_ns()'s clock.
  int64_t origin_ns() const { return origin_ns_; }

 private:
  ProfilerSession();
  int64_t origin_ns_;
  int64_t origin_unix_us_;
};

// What a run of steps spent its time in, built from the profiles of those steps.
struct PhaseTime {
  std::string name;
  double ms_per_step = 0;  // self time (nested phases excluded), per step, per thread running it
  double percent = 0;      // of the wall time of a step
};
struct OpTime {
  std::string name;
  double calls_per_step = 0;
  double ms_per_step = 0;  // summed over the threads that ran it
  double percent = 0;      // of the time in all kernels
};
struct Summary {
  int64_t steps = 0;
  double wall_ms_per_step = 0;
  double kernel_ms_per_step = 0;
  std::vector<PhaseTime> phases;  // in the order of a step, then others by name, then "other"
  std::vector<OpTime> ops;        // the top ones, by time, largest first
  // A few lines for a log: a header, one line per phase, one per op.
  std::string to_string() const;
};

// Adds up the phases (category kPhase) and kernels (kOp) of profiles, one after another, in
// bounded memory.
class SummaryBuilder {
 public:
  void add(const Profile& profile);
  // The summary of `steps` steps that took `wall_ns` together, with the `top_ops` largest ops.
  Summary summarize(int64_t steps, int64_t wall_ns, int top_ops = 10) const;
  void clear();

 private:
  struct Phase {
    int64_t self_ns = 0;
    std::vector<int> tids;
  };
  struct Op {
    int64_t calls = 0;
    int64_t ns = 0;
  };
  std::map<std::string_view, Phase> phases_;
  std::map<std::string_view, Op> ops_;
};

// The profile in Chrome's trace event format: "X" (complete) events with name, cat, ts and
// dur in microseconds, pid and tid, plus "M" events naming the process and each thread.
// Opens in chrome://tracing and https://ui.perfetto.dev.
std::string chrome_trace_json(const Profile& profile, std::string_view process_name = "cadre");

}  // namespace cadre::profiler
