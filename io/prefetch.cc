// prefetch: one background thread keeps a bounded buffer of upcoming results filled (an
// autotuned one reads on the consumer's thread when no core is spare).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/runtime/threading.h"
#include "core/base/strings.h"
#include "io/buffered_results.h"
#include "io/dataset_node.h"
#include "io/saved_elements.h"

namespace cadre::io {
namespace {

constexpr int64_t kMaxAutotuneBuffer = 16;
constexpr auto kSpin = std::chrono::microseconds(200);

class PrefetchNode : public PassingNode<PrefetchNode> {
 public:
  PrefetchNode(NodePtr input, int64_t buffer_size)
      : PassingNode(std::move(input)), buffer_size_(buffer_size) {
    if (buffer_size <= 0 && buffer_size != kAutotune) {
      throw InvalidArgumentError(str_cat("prefetch: buffer_size is ", buffer_size,
                                         "; expected a positive number or kAutotune"));
    }
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "prefetch"; }

  int64_t buffer_size_;
};

// The producer thread starts with the first next() (so that restore() before it needs no
// pause) and runs until the input ends or the iterator dies. Errors are buffered at their
// position like elements; production continues after them.
//
// Each side waits on its own condition variable and is notified after the mutex is
// released: a wake-up is expensive (on a VM, an interrupt to another CPU), so the producer
// wakes the consumer only when it waits, and the woken side never blocks again on the
// mutex right away.
class PrefetchIterator : public IteratorNode {
 public:
  PrefetchIterator(const PrefetchNode& node, const IteratorContext& context)
      : IteratorNode("prefetch"),
        node_(node),
        input_(node.input()->make_iterator(context)),
        fetchable_(node.input()->can_fetch()),
        autotune_(node.buffer_size_ == kAutotune),
        inline_(autotune_ && !spare_core()),
        limit_(autotune_ ? 1 : node.buffer_size_) {}

  ~PrefetchIterator() override { stop(); }

  std::optional<Element> next() override {
    std::unique_lock lock(mutex_);
    // The thread tuner (core/runtime/thread_tuner.h) may leave a core to spare once it finds
    // fewer compute threads faster (a small model): the input then moves to a thread of its
    // own for good, in parallel with the steps.
    if (inline_ && spare_core()) inline_ = false;
    if (inline_ && buffer_.empty() && !end_) return next_inline();
    if (!inline_ && !producer_.joinable() && !end_) start();
    if (buffer_.empty() && !end_) {
      // Spin briefly before sleeping, as OpenMP barriers do: waking a sleeping consumer
      // costs the producer a system call and an interrupt to another CPU per result.
      lock.unlock();
      auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (int i = 1; available_.load(std::memory_order_acquire) == 0; ++i) {
        if (i % 64 == 0) {
          if (std::chrono::steady_clock::now() > deadline) break;
          std::this_thread::yield();
        }
      }
      lock.lock();
    }
    if (buffer_.empty() && !end_) {
      // The consumer caught up. A deeper buffer helps only if the limit held the producer
      // back since the last time (bursts); a slower producer would just fill more memory.
      if (autotune_ && held_back_ && limit_ < kMaxAutotuneBuffer) ++limit_;
      held_back_ = false;
      ++consumers_waiting_;
      has_result_.wait(lock, [&] { return !buffer_.empty() || end_; });
      --consumers_waiting_;
    }
    if (buffer_.empty()) return std::nullopt;
    BufferedResult result = std::move(buffer_.front());
    buffer_.pop_front();
    ++consumed_;
    available_.store(buffer_.size() + (end_ ? 1 : 0), std::memory_order_release);
    bool wake = producer_waiting_;
    lock.unlock();
    if (wake) has_room_.notify_one();
    return result.take();
  }

  void prepare_save() override {
    std::unique_lock lock(mutex_);
    if (!producer_.joinable() || end_) return;  // nothing runs in the background
    snapshot_ = Snapshot{};                     // requested; the producer takes it
    bool wake = producer_waiting_;
    lock.unlock();
    if (wake) has_room_.notify_one();
  }

  void save_state(StateWriter& w) override {
    std::unique_lock lock(mutex_);
    std::optional<Snapshot> snapshot = std::move(snapshot_);
    snapshot_.reset();
    // The input's position recorded in the background, if it is still behind the consumer:
    // the results produced before it that are still buffered complete the state.
    StateWriter input = w.child("input");
    if (snapshot && snapshot->taken && consumed_ <= snapshot->produced) {
      save_results(w, buffer_, *node_.input(), snapshot->produced - consumed_);
      w.write_int("end", snapshot->end);
      if (snapshot->prefix == input.prefix()) {
        input.adopt(std::move(snapshot->input));
      } else {
        input.write_all(snapshot->input);
      }
      input_prefix_ = input.prefix();
      return;
    }
    paused_ = true;
    ++consumers_waiting_;
    has_result_.wait(lock, [&] { return !producing_; });
    --consumers_waiting_;
    save_results(w, buffer_, *node_.input());
    w.write_int("end", end_);
    input_->save(input);
    input_prefix_ = input.prefix();
    paused_ = false;
    lock.unlock();
    has_room_.notify_one();
  }

  void restore_state(const StateReader& r) override {
    stop();
    std::lock_guard lock(mutex_);
    input_->restore(r.child("input"));
    buffer_ = restore_results(r, *node_.input());
    end_ = r.read_int("end") != 0;
    available_.store(buffer_.size() + (end_ ? 1 : 0), std::memory_order_release);
    cancelled_ = false;
    consumed_ = 0;
    snapshot_.reset();
  }

 private:
  // An autotuned prefetch when the cores have no room for its thread (spare_core()): the
  // producer would take its time from the compute threads, which wait for it all the same,
  // and a synchronous job waits for its slowest worker. So the consumer reads the input
  // itself, once the results a restore brought back are taken. A two-worker MLP job on two
  // cores ran 8-14% faster so at batch 256, 4-5% at 2048
  // (docs/BENCHMARKS.md#distributed-scaling).
  std::optional<Element> next_inline() {
    std::optional<Element> element = input_->next();
    if (!element) {
      end_ = true;
      available_.store(1, std::memory_order_release);
    }
    return element;
  }

  void start() {
    cancelled_ = false;
    producer_ = std::thread([this] { produce(); });
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    has_room_.notify_all();
    if (producer_.joinable()) producer_.join();
  }

  void produce() {
    set_current_thread_name("cadre_prefetch");
    std::unique_lock lock(mutex_);
    while (true) {
      if (!cancelled_ && !snapshot_pending() &&
          (paused_ || static_cast<int64_t>(buffer_.size()) >= limit_)) {
        held_back_ = held_back_ || !paused_;
        producer_waiting_ = true;
        has_room_.wait(lock, [&] {
          return cancelled_ || snapshot_pending() ||
                 (!paused_ && static_cast<int64_t>(buffer_.size()) < limit_);
        });
        producer_waiting_ = false;
      }
      if (cancelled_) return;
      if (snapshot_pending()) {
        take_snapshot(lock);
        continue;
      }
      producing_ = true;
      lock.unlock();
      std::optional<Element> element;
      std::exception_ptr error;
      std::string origin_bytes;
      try {
        element = input_->next();
        // Here, not in a save on the consumer's thread: a save then copies a few hundred
        // bytes per result instead of encoding its origin from another core's cache.
        if (element && fetchable_) origin_bytes = encode_origin_words(element->origin);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      producing_ = false;
      if (error) {
        buffer_.push_back(BufferedResult{std::nullopt, error, {}});
      } else if (element) {
        buffer_.push_back(BufferedResult{std::move(element), nullptr, std::move(origin_bytes)});
      } else {
        end_ = true;
      }
      available_.store(buffer_.size() + (end_ ? 1 : 0), std::memory_order_release);
      if (consumers_waiting_ > 0) {
        lock.unlock();
        has_result_.notify_all();  // the consumer, or save() waiting for this call to end
        lock.lock();
      }
      if (end_) return;
    }
  }

  // The input's state as the producer saw it between two results (prepare_save); requested
  // while snapshot_ holds one not taken yet.
  struct Snapshot {
    bool taken = false;
    IteratorState input;
    std::string prefix;     // input's keys start with it
    uint64_t produced = 0;  // results produced before it
    bool end = false;
  };

  bool snapshot_pending() const { return snapshot_ && !snapshot_->taken; }

  // On the producer, with the mutex held (released while the input saves).
  void take_snapshot(std::unique_lock<std::mutex>& lock) {
    producing_ = true;  // a save() in the meantime waits for the input as for a next()
    uint64_t produced = consumed_ + buffer_.size();
    bool end = end_;
    std::string prefix = input_prefix_;
    lock.unlock();
    IteratorState input;
    bool ok = true;
    try {
      input_->save(StateWriter(input, prefix));
    } catch (...) {
      ok = false;  // save() will pause and save the input itself, and see the error
    }
    lock.lock();
    producing_ = false;
    if (snapshot_pending()) {  // not consumed by a save() meanwhile
      if (ok) {
        *snapshot_ = Snapshot{true, std::move(input), std::move(prefix), produced, end};
      } else {
        snapshot_.reset();
      }
    }
    if (consumers_waiting_ > 0) {
      lock.unlock();
      has_result_.notify_all();
      lock.lock();
    }
  }

  const PrefetchNode& node_;
  std::unique_ptr<IteratorNode> input_;  // used by the producer, or by save/restore while
                                         // the producer is paused or stopped
  const bool fetchable_;                 // results are saved as origins (see saved_elements.h)
  const bool autotune_;
  bool inline_;  // see next_inline()

  std::mutex mutex_;                    // guards everything below
  std::condition_variable has_result_;  // the consumer (or save) waits here
  std::condition_variable has_room_;    // the producer waits here
  std::deque<BufferedResult> buffer_;
  int64_t limit_;
  bool end_ = false;        // the input is exhausted (the buffer may still hold results)
  bool producing_ = false;  // the producer is inside input_->next()
  bool paused_ = false;
  bool cancelled_ = false;
  bool held_back_ = false;  // the producer waited for room since the consumer last waited
  bool producer_waiting_ = false;
  // Where the input's state goes in the last save: a snapshot written with these keys is
  // moved into the next save instead of copied under them.
  std::string input_prefix_;
  int consumers_waiting_ = 0;
  uint64_t consumed_ = 0;  // results taken by next() (so the buffer holds results
                           // consumed_ .. consumed_ + size - 1 in production order)
  std::optional<Snapshot> snapshot_;
  // Results in the buffer (+1 at the end), for the consumer to spin on without the mutex.
  std::atomic<size_t> available_{0};
  std::thread producer_;
};

std::unique_ptr<IteratorNode> PrefetchNode::make_iterator(const IteratorContext& context) const {
  return std::make_unique<PrefetchIterator>(*this, context);
}

}  // namespace

Dataset Dataset::prefetch(int64_t buffer_size) const {
  return Dataset(std::make_shared<PrefetchNode>(node_, buffer_size));
}

}  // namespace cadre::io
