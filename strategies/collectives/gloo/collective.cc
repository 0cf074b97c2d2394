#include "strategies/collectives/gloo/collective.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

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
    size_t used = family == AF_INET ? sizeof(sockaddr_in)
                  : family == AF_INET6 ? sizeof(sockaddr_in6)
                                       : sizeof(sockaddr_storage);
    std::memset(bytes.data() + at + used, 0, sizeof(sockaddr_storage) - used);
  }
  return bytes;
}

// Gloo's rendezvous store on ours, its keys under a prefix.
class RendezvousStore : public gloo::rendezvous::Store {
 public:
  RendezvousStore(cadre::Store& store, std::string prefix, double timeout_seconds)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout_seconds) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + "/" + key, without_stale_bytes(data));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_.get(prefix_ + "/" + key, timeout_);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, {}); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    std::vector<std::string> prefixed;
    for (const std::string& key : keys) prefixed.push_back(prefix_ + "/" + key);
    store_.wait(prefixed, timeout_);
  }

 private:
  cadre::Store& store_;
  std::string prefix_;
  double timeout_;
};

// c = a + b, vectorised by the compiler (Gloo's generic sum goes element by element through
// a pointer that may alias).
template <typename T>
void add(void* c, const void* a, const void* b, size_t n) {
  T* __restrict out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (out == x) {
    for (size_t i = 0; i < n; ++i) out[i] += y[i];
  } else if (out == y) {
    for (size_t i = 0; i < n; ++i) out[i] += x[i];
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  }
}

// Up to this size, an all-reduce of more than 2 processes goes by BCube rather than the ring.
constexpr size_t kSmallBytes = 256 << 10;

class GlooCollective : public ProcessCollective {
 public:
  explicit GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context)
      : context_(std::move(context)) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "Gloo"; }

  void sum(float* data, size_t count) override { reduce(data, count); }
  void sum(double* data, size_t count) override { reduce(data, count); }

  void broadcast(void* data, size_t bytes, int root) override {
    guard("broadcast", [&] {
      gloo::BroadcastOptions options(context_);
      options.setOutput(static_cast<char*>(data), bytes);
      options.setRoot(root);
      options.setTag(next_tag());
      gloo::broadcast(options);
    });
  }

 private:
  template <typename T>
  void reduce(T* data, size_t count) {
    if (count == 0) return;
    guard("all-reduce", [&] {
      gloo::AllreduceOptions options(context_);
      options.setOutput(data, count);
      options.setReduceFunction(&add<T>);
      options.setTag(next_tag());
      // By size: the ring moves the fewest bytes, but takes 2(n-1) rounds; for a small
      // buffer on more than 2 processes the rounds dominate, and BCube's recursive exchange
      // takes about log2(n).
      options.setAlgorithm(size() > 2 && count * sizeof(T) <= kSmallBytes
                               ? gloo::AllreduceOptions::Algorithm::BCUBE
                               : gloo::AllreduceOptions::Algorithm::RING);
      gloo::allreduce(options);
    });
  }

  uint32_t next_tag() { return tag_++; }

  template <typename F>
  void guard(const char* what, F&& run) {
    try {
      run();
    } catch (const gloo::IoException& e) {
      throw UnavailableError(str_cat("gloo ", what, " across ", size(), " processes (this is rank ",
                                     rank(), "): a peer is gone: ", e.what()));
    } catch (const gloo::Exception& e) {
      throw AbortedError(
          str_cat("gloo ", what, " across ", size(), " processes failed: ", e.what()));
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  uint32_t tag_ = 0;
};

}  // namespace

std::unique_ptr<ProcessCollective> gloo_collective(Store& store, int rank, int size,
                                                   const std::string& host, double timeout_seconds,
                                                   const std::string& prefix) {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
    RendezvousStore rendezvous(store, prefix, timeout_seconds);
    context->connectFullMesh(rendezvous, device);
    return std::make_unique<GlooCollective>(std::move(context));
  } catch (const gloo::Exception& e) {
    throw UnavailableError(
        str_cat("gloo: rank ", rank, " of ", size, " could not connect on ", host, ": ", e.what()));
  }
}

}  // namespace cadre
