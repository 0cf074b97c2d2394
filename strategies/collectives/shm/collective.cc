#include "strategies/collectives/shm/collective.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/shm/barrier.h"
#include "strategies/collectives/shm/segment.h"

namespace cadre {

namespace {

constexpr uint64_t kMagic = 0x68732d6572646163;  // "cadre-sh"
constexpr int kMaxRanks = 256;
// Up to this many bytes every process reads every slot (one barrier); above, each sums its
// share and the others copy it (two barriers per chunk, 1/n of the adds each).
constexpr size_t kOneExchangeBytes = 64 << 10;
// Shares of a chunk start on cache lines, so that no two processes write one line.
constexpr size_t kLineBytes = 64;

struct Header {
  uint64_t magic;
  uint64_t token;
  uint32_t ranks;
  uint64_t slot_bytes;
  SharedBarrierState barrier;
  int32_t pid[kMaxRanks];
  uint64_t pid_namespace[kMaxRanks];
};

// Whether `pid` names a running process: not gone, and not a zombie that its parent has
// yet to reap (it is dead all the same).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream stat(str_cat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

size_t header_bytes() { return (sizeof(Header) + 4095) / 4096 * 4096; }

// out = a + b and out += x: plain loops over restrict pointers, which the compiler
// vectorises (Gloo's generic sum goes element by element through pointers that may alias).
template <typename T>
void add(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
template <typename T>
void add_to(T* __restrict out, const T* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += x[i];
}

class SharedMemoryCollective : public ProcessCollective {
 public:
  SharedMemoryCollective(Segment segment, int rank, SharedMemoryOptions options)
      : segment_(std::move(segment)),
        header_(static_cast<Header*>(segment_.data())),
        slots_(static_cast<char*>(segment_.data()) + header_bytes()),
        rank_(rank),
        size_(static_cast<int>(header_->ranks)),
        slot_bytes_(header_->slot_bytes),
        options_(std::move(options)),
        own_pid_namespace_(pid_namespace()) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "shared memory"; }

  void sum(float* data, size_t count) override {
    guard("all-reduce", [&] { reduce(data, count); });
  }
  void sum(double* data, size_t count) override {
    guard("all-reduce", [&] { reduce(data, count); });
  }

  void leave() override { break_barrier(header_->barrier, rank_); }

  void broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) {
      throw InvalidArgumentError(str_cat("broadcast root ", root, " is not a rank of ", size_));
    }
    guard("broadcast", [&] {
      char* bytes_at = static_cast<char*>(data);
      for (size_t at = 0; at < bytes; at += slot_bytes_) {
        size_t n = std::min(slot_bytes_, bytes - at);
        int set = next_set();
        if (rank_ == root) std::memcpy(slot(set, root), bytes_at + at, n);
        barrier();
        if (rank_ != root) std::memcpy(bytes_at + at, slot(set, root), n);
      }
    });
  }

 private:
  char* slot(int set, int rank) const {
    return slots_ + (static_cast<size_t>(set) * size_ + rank) * slot_bytes_;
  }
  int next_set() { return static_cast<int>(sequence_++ & 1); }

  template <typename T>
  void reduce(T* data, size_t count) {
    if (size_ == 1 || count == 0) return;
    const size_t bytes = count * sizeof(T);
    if (bytes <= kOneExchangeBytes && bytes <= slot_bytes_) {
      int set = next_set();
      std::memcpy(slot(set, rank_), data, bytes);
      barrier();
      sum_slots(set, data, 0, count);
      return;
    }
    const size_t chunk = slot_bytes_ / sizeof(T);
    for (size_t at = 0; at < count; at += chunk)
      reduce_chunk(data + at, std::min(chunk, count - at));
  }

  // The slots' elements [begin, end) of `set`, summed in rank order into out[begin, end).
  template <typename T>
  void sum_slots(int set, T* out, size_t begin, size_t end) const {
    auto in = [&](int r) { return reinterpret_cast<const T*>(slot(set, r)) + begin; };
    size_t n = end - begin;
    add(out + begin, in(0), in(1), n);
    for (int r = 2; r < size_; ++r) add_to(out + begin, in(r), n);
  }

  // Share r of a chunk of m elements: [bound(r), bound(r + 1)).
  template <typename T>
  size_t bound(int r, size_t m) const {
    if (r == size_) return m;
    constexpr size_t line = kLineBytes / sizeof(T);
    return m * static_cast<size_t>(r) / static_cast<size_t>(size_) / line * line;
  }

  // Reduce-scatter then all-gather through the slots: every rank stages the shares the
  // others sum, sums its own share into its slot (its own values read in place), and copies
  // the others' sums back.
  template <typename T>
  void reduce_chunk(T* data, size_t m) {
    int set = next_set();
    T* own = reinterpret_cast<T*>(slot(set, rank_));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      size_t b = bound<T>(r, m), e = bound<T>(r + 1, m);
      std::memcpy(own + b, data + b, (e - b) * sizeof(T));
    }
    barrier();
    size_t b = bound<T>(rank_, m), e = bound<T>(rank_ + 1, m);
    auto in = [&](int r) {
      return r == rank_ ? data + b : reinterpret_cast<const T*>(slot(set, r)) + b;
    };
    add(own + b, in(0), in(1), e - b);
    for (int r = 2; r < size_; ++r) add_to(own + b, in(r), e - b);
    std::memcpy(data + b, own + b, (e - b) * sizeof(T));
    barrier();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      size_t rb = bound<T>(r, m), re = bound<T>(r + 1, m);
      std::memcpy(data + rb, reinterpret_cast<const T*>(slot(set, r)) + rb, (re - rb) * sizeof(T));
    }
  }

  void barrier() { arrive_and_wait(header_->barrier, static_cast<uint32_t>(size_), check_); }

  // Runs while this process waits: the deadline, the coordination service's word on the
  // cluster, and whether each peer's process still exists (when pids mean the same here).
  void check() const {
    if (std::chrono::steady_clock::now() > deadline_) {
      throw DeadlineExceededError(
          str_cat("some process did not arrive within ", options_.timeout_seconds, " s"));
    }
    if (options_.peer_failure) {
      if (std::string failure = options_.peer_failure(); !failure.empty()) {
        throw AbortedError(str_cat("the cluster failed: ", failure));
      }
    }
    for (int r = 0; r < size_; ++r) {
      pid_t pid = header_->pid[r];
      if (r == rank_ || header_->pid_namespace[r] != own_pid_namespace_) continue;
      if (!alive(pid)) {
        std::string name = static_cast<size_t>(r) < options_.rank_names.size()
                               ? str_cat(options_.rank_names[r], " (rank ", r, ", ")
                               : str_cat("rank ", r, " (");
        throw UnavailableError(str_cat(name, "pid ", pid, ") is gone"));
      }
    }
  }

  std::string name_of(int r) const {
    return static_cast<size_t>(r) < options_.rank_names.size()
               ? str_cat(options_.rank_names[r], " (rank ", r, ")")
               : str_cat("rank ", r);
  }

  template <typename F>
  void guard(const char* what, F&& run) {
    if (!broken_.empty()) {
      throw AbortedError(str_cat("shared-memory ", what, " across ", size_,
                                 " processes: the collective failed before: ", broken_));
    }
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(options_.timeout_seconds));
    try {
      run();
    } catch (const Error& e) {
      broken_ = e.what();
      // A peer that gave up (it failed, or left) named itself in the barrier.
      uint32_t left = header_->barrier.broken.load(std::memory_order_acquire);
      if (left != 0 && static_cast<int>(left) - 1 != rank_) {
        broken_ = str_cat(name_of(static_cast<int>(left) - 1), " gave up on the collective");
      }
      break_barrier(header_->barrier, rank_);
      std::string message = str_cat("shared-memory ", what, " across ", size_,
                                    " processes (this is rank ", rank_, "): ", broken_);
      if (dynamic_cast<const DeadlineExceededError*>(&e)) throw DeadlineExceededError(message);
      if (dynamic_cast<const UnavailableError*>(&e)) throw UnavailableError(message);
      throw AbortedError(message);
    }
  }

  Segment segment_;
  Header* header_;
  char* slots_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  SharedMemoryOptions options_;
  uint64_t own_pid_namespace_;
  uint64_t sequence_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::function<void()> check_ = [this] { check(); };
  std::string broken_;
};

}  // namespace

std::unique_ptr<ProcessCollective> shared_memory_collective(Store& store, int rank, int size,
                                                            SharedMemoryOptions options,
                                                            const std::string& prefix) {
  if (size <= 0 || size > kMaxRanks || rank < 0 || rank >= size) {
    throw InvalidArgumentError(str_cat("shared memory: rank ", rank, " of ", size, " (at most ",
                                       kMaxRanks, " processes on one host)"));
  }
  if (options.slot_bytes < 4096 || options.slot_bytes % kLineBytes != 0) {
    throw InvalidArgumentError(str_cat("shared memory: slot_bytes ", options.slot_bytes,
                                       " must be a multiple of ", kLineBytes, " and >= 4096"));
  }
  const size_t bytes = header_bytes() + 2 * static_cast<size_t>(size) * options.slot_bytes;
  const double timeout = options.timeout_seconds;
  Segment segment;
  std::string attached = "ok";
  if (rank == 0) {
    std::string published;
    try {
      segment = create_segment(bytes);
      std::random_device device;
      uint64_t token = (static_cast<uint64_t>(device()) << 32) ^ device();
      auto* header = static_cast<Header*>(segment.data());
      header->token = token;
      header->ranks = static_cast<uint32_t>(size);
      header->slot_bytes = options.slot_bytes;
      header->magic = kMagic;
      published = str_cat(segment.name(), " ", token);
    } catch (const Error& e) {
      attached = e.what();
    }
    store.set(prefix + "/segment", published);
  } else {
    std::string published = store.get(prefix + "/segment", timeout);
    size_t space = published.find(' ');
    if (space == std::string::npos) {
      attached = "rank 0 made no segment";
    } else {
      try {
        segment = open_segment(published.substr(0, space), bytes);
        auto* header = static_cast<const Header*>(segment.data());
        if (header->magic != kMagic || str_cat(header->token) != published.substr(space + 1)) {
          attached = str_cat("the segment named ", segment.name(), " here is another one");
        }
      } catch (const Error& e) {
        attached = e.what();
      }
    }
  }
  if (attached == "ok") {
    auto* header = static_cast<Header*>(segment.data());
    header->pid[rank] = static_cast<int32_t>(::getpid());
    header->pid_namespace[rank] = pid_namespace();
  }
  store.set(str_cat(prefix, "/attached/", rank), attached);
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(str_cat(prefix, "/attached/", r));
  store.wait(keys, timeout);
  bool everyone = true;
  for (const std::string& key : keys) everyone &= store.get(key, timeout) == "ok";
  // Every process has mapped it, or never will: the name can go.
  segment.unlink();
  if (!everyone) return nullptr;
  return std::make_unique<SharedMemoryCollective>(std::move(segment), rank, std::move(options));
}

}  // namespace cadre
