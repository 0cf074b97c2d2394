#include "strategies/collectives/gloo/collective.h"

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/collectives/gloo/socket_watchdog.h"

namespace cadre {

namespace {

// Gloo publishes each pair's TCP address as the raw bytes of {sockaddr_storage, int64
// sequence number}, records concatenated, of which getsockname() filled only the family's
// part: the rest is whatever the stack held (library and heap addresses). Those bytes are
// zeroed before they reach the store, so nothing uninitialised crosses the network.
std::string without_stale_bytes(const std::vector<char>& data) {
  constexpr size_t kRecord = sizeof(sockaddr_storage) + sizeof(int64_t);
  std::string bytes(data.begin(), data.end());
  if (bytes.empty() || bytes.size() % kRecord != 0) return bytes;
  for (size_t at = 0; at < bytes.size(); at += kRecord) {
    sa_family_t family;
    std::memcpy(&family, bytes.data() + at, sizeof family);
    size_t used = family == AF_INET    ? sizeof(sockaddr_in)
                  : family == AF_INET6 ? sizeof(sockaddr_in6)
                                       : sizeof(sockaddr_storage);
    std::memset(bytes.data() + at + used, 0, sizeof(sockaddr_storage) - used);
  }
  return bytes;
}

// Gloo's rendezvous store on ours, its keys under a prefix. It notes the listening
// endpoints that pass through it, this process's and its peers', for the SocketWatchdog.
class RendezvousStore : public gloo::rendezvous::Store {
 public:
  RendezvousStore(cadre::Store& store, std::string prefix, double timeout_seconds)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout_seconds) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    std::string bytes = without_stale_bytes(data);
    note_listeners(bytes);
    store_.set(prefix_ + "/" + key, bytes);
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_.get(prefix_ + "/" + key, timeout_);
    note_listeners(value);
    return {value.begin(), value.end()};
  }
  const std::set<std::string>& listeners() const { return listeners_; }
  void wait(const std::vector<std::string>& keys) override { wait(keys, {}); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    std::vector<std::string> prefixed;
    for (const std::string& key : keys) prefixed.push_back(prefix_ + "/" + key);
    store_.wait(prefixed, timeout_);
  }

 private:
  void note_listeners(const std::string& bytes) {
    for (std::string& endpoint : listener_endpoints(bytes)) listeners_.insert(std::move(endpoint));
  }

  cadre::Store& store_;
  std::string prefix_;
  double timeout_;
  std::set<std::string> listeners_;
};

// x += y, vectorised by the compiler (Gloo's own sum goes through pointers that may alias).
template <typename T>
void add_into(T* x, const T* y, size_t n) {
  T* __restrict out = x;
  for (size_t i = 0; i < n; ++i) out[i] += y[i];
}

template <typename T>
const gloo::ReductionFunction<T>* adder() {
  static const gloo::ReductionFunction<T> add(gloo::SUM, &add_into<T>);
  return &add;
}

// Gloo writes to its sockets with writev(), and a write to a peer that has died raises
// SIGPIPE, whose default action ends the process before it can name the peer. A process's
// signal dispositions are its owner's, so instead SIGPIPE is blocked on the threads that
// write: the caller's for the length of an operation (the pairs are synchronous), and Gloo's
// event-loop thread for good (it inherits the mask of the thread that creates the device).
// A write that failed raised the thread's SIGPIPE: take() consumes it before the mask is
// restored (a write that succeeded raised none).
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

  void take() {
    if (sigismember(&old_, SIGPIPE) == 1) return;  // the caller blocks it: its own business
    sigset_t pending;
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
  }

 private:
  sigset_t pipe_;
  sigset_t old_;
};

// Up to this size, an all-reduce of more than 2 processes goes by halving and doubling
// (about log2(n) exchanges) rather than the ring's 2(n-1).
constexpr size_t kSmallBytes = 256 << 10;

// The ring's messages are at most this size. Each process sends a message, then waits for
// its left neighbour's: at most two of its messages are ever unread, which the socket's
// buffers hold, so a blocking write never waits on a peer that is itself writing.
constexpr size_t kMessageBytes = 128 << 10;

// The pairs run in Gloo's synchronous mode: the calling thread writes and reads the sockets
// itself. Gloo's default hands every message to its event-loop thread and back, and with
// its unbound-buffer collectives that cost about 2 ms per MiB between two processes on two
// cores, against about 0.5 ms here (docs/BENCHMARKS.md#all-reduce). That mode reads a message
// only when its receiver waits for it, into a buffer registered for its slot; so the ring
// receives into one inbox, registered once on the pair to its left neighbour, and sends
// straight from the caller's memory.
class GlooCollective : public ProcessCollective {
 public:
  GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context, GlooOptions options,
                 const std::set<std::string>& listeners)
      : context_(std::move(context)),
        rank_names_(std::move(options.rank_names)),
        inbox_(kMessageBytes) {
    if (size() == 1) return;
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank()) context_->getPair(peer)->setSync(/*enable=*/true, /*busyPoll=*/false);
    }
    watchdog_ = std::make_unique<SocketWatchdog>(listeners, std::move(options.peer_failure));
    // Slot base + r is what rank r receives the ring's messages in, from its left neighbour.
    slots_ = context_->nextSlot(size());
    receive_ =
        context_->getPair(left())->createRecvBuffer(slots_ + rank(), inbox_.data(), inbox_.size());
  }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "Gloo"; }

  void sum(float* data, size_t count) override { reduce(data, count); }
  void sum(double* data, size_t count) override { reduce(data, count); }
  // Gloo's pairs close their sockets only as the context goes, which may be in use: the
  // watchdog shuts them down instead.
  void leave() override {
    if (watchdog_) watchdog_->shut_down("this process left the collective");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    if (size() == 1 || bytes == 0) return;
    guard("broadcast", rank() == root ? kEveryOther : root, root, [&] {
      gloo::BroadcastOneToAll<char>(context_, {static_cast<char*>(data)}, bytes, root).run();
    });
  }

 private:
  template <typename T>
  void reduce(T* data, size_t count) {
    if (count == 0 || size() == 1) return;
    const bool small = size() > 2 && count * sizeof(T) <= kSmallBytes;
    guard("all-reduce", small ? kEveryOther : left(), (rank() + 1) % size(), [&] {
      if (small) {
        gloo::AllreduceHalvingDoubling<T>(context_, {data}, static_cast<int>(count), adder<T>())
            .run();
      } else {
        ring(data, count);
      }
    });
  }

  // Reduce-scatter then all-gather around the ring, in segments of size() messages: each
  // block's sum is made by one process and copied to the others, so every process ends
  // with the same bits.
  template <typename T>
  void ring(T* data, size_t count) {
    const int n = size();
    const int right = (rank() + 1) % n;
    // Addressed to the right neighbour's inbox slot. (A send buffer's destructor unregisters
    // its slot on the pair, so it must not carry this rank's own inbox slot.)
    std::unique_ptr<gloo::transport::Buffer> outbox =
        context_->getPair(right)->createSendBuffer(slots_ + right, data, count * sizeof(T));
    const T* received = reinterpret_cast<const T*>(inbox_.data());
    const size_t segment = n * (kMessageBytes / sizeof(T));
    for (size_t begin = 0; begin < count; begin += segment) {
      const size_t length = std::min(segment, count - begin);
      auto start = [&](int block) { return begin + length * block / n; };
      auto exchange = [&](int send_block, int receive_block) {
        outbox->send(start(send_block) * sizeof(T),
                     (start(send_block + 1) - start(send_block)) * sizeof(T));
        receive_->waitRecv();
        outbox->waitSend();
        return std::make_pair(data + start(receive_block),
                              start(receive_block + 1) - start(receive_block));
      };
      for (int step = 0; step < n - 1; ++step) {
        auto [into, elements] = exchange((rank() - step + n) % n, (rank() - step - 1 + 2 * n) % n);
        add_into(into, received, elements);
      }
      // Each process now holds block rank() + 1's sum.
      for (int step = 0; step < n - 1; ++step) {
        auto [into, elements] = exchange((rank() + 1 - step + n) % n, (rank() - step + n) % n);
        std::memcpy(into, received, elements * sizeof(T));
      }
    }
  }

  int left() const { return (rank() + size() - 1) % size(); }

  std::string name_of(int r) const { return rank_name(rank_names_, r); }

  // "worker:0 or worker:2": the peers an operation talks to (`first` and `second`, or every
  // other rank when `first` is kEveryOther), one of which is gone when a pair fails.
  std::string peers_named(int first, int second) const {
    std::string names;
    for (int r = 0; r < size(); ++r) {
      bool talks = first == kEveryOther ? r != rank() : r == first || r == second;
      if (talks) names += str_cat(names.empty() ? "" : " or ", name_of(r));
    }
    return names;
  }

  static constexpr int kEveryOther = -1;

  template <typename F>
  void guard(const char* what, int first, int second, F&& run) {
    SigpipeBlocked writes;
    try {
      run();
    } catch (const gloo::IoException& e) {
      writes.take();
      // Once the service has declared a task dead, that is what ended the operation (the
      // watchdog, or a peer's, shut the sockets down).
      if (std::string verdict = watchdog_ ? watchdog_->verdict() : ""; !verdict.empty()) {
        throw AbortedError(str_cat("gloo ", what, " across ", size(), " processes (this is ",
                                   name_of(rank()), "): the cluster failed: ", verdict));
      }
      throw UnavailableError(str_cat("gloo ", what, " across ", size(), " processes (this is ",
                                     name_of(rank()), "): a peer is gone (",
                                     peers_named(first, second), "): ", e.what()));
    } catch (const gloo::Exception& e) {
      writes.take();
      throw AbortedError(
          str_cat("gloo ", what, " across ", size(), " processes failed: ", e.what()));
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<std::string> rank_names_;
  std::vector<char> inbox_;
  int slots_ = 0;
  std::unique_ptr<gloo::transport::Buffer> receive_;  // the left neighbour's, into inbox_
  std::unique_ptr<SocketWatchdog> watchdog_;          // stops before the context closes its sockets
};

}  // namespace

std::unique_ptr<ProcessCollective> gloo_collective(Store& store, int rank, int size,
                                                   const std::string& host, GlooOptions options,
                                                   const std::string& prefix) {
  const double timeout_seconds = options.timeout_seconds;
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  SigpipeBlocked writes;  // here and in the device's event-loop thread, created below
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
    RendezvousStore rendezvous(store, prefix, timeout_seconds);
    context->connectFullMesh(rendezvous, device);
    return std::make_unique<GlooCollective>(std::move(context), std::move(options),
                                            rendezvous.listeners());
  } catch (const gloo::Exception& e) {
    writes.take();
    throw UnavailableError(
        str_cat("gloo: rank ", rank, " of ", size, " could not connect on ", host, ": ", e.what()));
  }
}

}  // namespace cadre
