// Recording: a buffer per thread, found through a thread_local, registered once with the
// process's list of buffers, which a session drains.
//
// The list is process-wide by nature (kernels record without being handed a context, as in
// TensorFlow's profiler); what is process-wide is only this recorder, and sessions are owned
// objects. It is never destroyed: threads may record while the process exits.
#include "cadre/runtime/profiler.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_set>

#include "cadre/base/errors.h"

namespace cadre::profiler {

namespace {

std::atomic<bool> recording{false};

// Events a thread keeps between two collects (about 12 MB); later ones are dropped and
// counted, so that a session nobody collects (a run that failed with its hook's session
// still open) cannot grow without bound.
constexpr size_t kMaxEventsPerThread = size_t{1} << 18;

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;  // start_ns on the steady clock, in order of the scopes' ends
  int64_t dropped = 0;
  std::string name;
  int tid = 0;
  bool exited = false;
};

struct Recorder {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  bool session_active = false;
  std::atomic<int64_t> origin_ns{0};
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed, see above
  return *r;
}

// Owns this thread's buffer; when the thread ends, the buffer stays with the recorder until
// a session has taken its events.
struct ThreadHandle {
  std::shared_ptr<ThreadBuffer> buffer;
  ~ThreadHandle() {
    if (!buffer) return;
    std::lock_guard lock(buffer->mutex);
    buffer->exited = true;
  }
};
thread_local ThreadHandle this_thread;

ThreadBuffer& thread_buffer() {
  if (!this_thread.buffer) [[unlikely]] {
    auto buffer = std::make_shared<ThreadBuffer>();
    buffer->tid = static_cast<int>(::gettid());
    char name[32] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0 || name[0] == '\0') {
      std::snprintf(name, sizeof(name), "thread");
    }
    buffer->name = name;
    {
      std::lock_guard lock(recorder().mutex);
      recorder().buffers.push_back(buffer);
    }
    this_thread.buffer = std::move(buffer);
  }
  return *this_thread.buffer;
}

bool event_order(const Event& a, const Event& b) {
  if (a.tid != b.tid) return a.tid < b.tid;
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  return a.duration_ns > b.duration_ns;  // the enclosing one first
}

}  // namespace

bool enabled() { return recording.load(std::memory_order_relaxed); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(std::string_view name, std::string_view category, int64_t start_ns, int64_t end_ns) {
  if (!recording.load(std::memory_order_relaxed)) return;  // the session ended meanwhile
  ThreadBuffer& buffer = thread_buffer();
  std::lock_guard lock(buffer.mutex);
  if (buffer.events.size() >= kMaxEventsPerThread) [[unlikely]] {
    ++buffer.dropped;
    return;
  }
  buffer.events.push_back({name, category, buffer.tid, start_ns, end_ns - start_ns});
}

std::string_view intern(std::string_view text) {
  static std::mutex* mutex = new std::mutex;
  static auto* strings = new std::unordered_set<std::string>;  // nodes never move
  std::lock_guard lock(*mutex);
  return *strings->emplace(text).first;
}

void set_thread_name(std::string_view name) {
  ThreadBuffer& buffer = thread_buffer();
  std::lock_guard lock(buffer.mutex);
  buffer.name = name;
}

void Profile::append(Profile other) {
  size_t middle = events.size();
  events.insert(events.end(), other.events.begin(), other.events.end());
  std::inplace_merge(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(middle),
                     events.end(), event_order);
  thread_names.merge(other.thread_names);
  if (origin_unix_us == 0) origin_unix_us = other.origin_unix_us;
  if (pid == 0) pid = other.pid;
  dropped_events += other.dropped_events;
}

ProfilerSession::ProfilerSession()
    : origin_ns_(now_ns()),
      origin_unix_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {}

std::unique_ptr<ProfilerSession> ProfilerSession::start() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (r.session_active) {
    throw FailedPreconditionError(
        "ProfilerSession::start: another profiler session is recording in this process");
  }
  for (const auto& buffer : r.buffers) {
    std::lock_guard buffer_lock(buffer->mutex);
    buffer->events.clear();
    buffer->dropped = 0;
  }
  std::unique_ptr<ProfilerSession> session(new ProfilerSession());
  r.origin_ns.store(session->origin_ns_, std::memory_order_relaxed);
  r.session_active = true;
  recording.store(true, std::memory_order_relaxed);
  return session;
}

ProfilerSession::~ProfilerSession() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  recording.store(false, std::memory_order_relaxed);
  r.session_active = false;
  std::erase_if(r.buffers, [](const std::shared_ptr<ThreadBuffer>& buffer) {
    std::lock_guard buffer_lock(buffer->mutex);
    buffer->events.clear();
    buffer->events.shrink_to_fit();
    buffer->dropped = 0;
    return buffer->exited;
  });
}

Profile ProfilerSession::collect() {
  Profile profile;
  profile.origin_unix_us = origin_unix_us_;
  profile.pid = static_cast<int>(::getpid());
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.buffers, [&](const std::shared_ptr<ThreadBuffer>& buffer) {
    std::vector<Event> events;
    std::string name;
    bool exited;
    {
      std::lock_guard buffer_lock(buffer->mutex);
      events.swap(buffer->events);
      profile.dropped_events += buffer->dropped;
      buffer->dropped = 0;
      name = buffer->name;
      exited = buffer->exited;
    }
    bool any = false;
    for (Event& e : events) {
      if (e.start_ns < origin_ns_) continue;  // opened before this session started
      e.start_ns -= origin_ns_;
      profile.events.push_back(e);
      any = true;
    }
    if (any) profile.thread_names[buffer->tid] = name;
    return exited;
  });
  std::sort(profile.events.begin(), profile.events.end(), event_order);
  return profile;
}

}  // namespace cadre::profiler
