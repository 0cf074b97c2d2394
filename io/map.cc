// map: inline, or on a pool of background threads that keeps input order (or, when not
// deterministic, hands out whichever result finishes first).
#include <algorithm>
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

namespace cadre::io {
namespace {

class MapNode : public UnaryNode<MapNode> {
 public:
  MapNode(NodePtr input, Dataset::MapFn fn, int num_parallel_calls, bool deterministic)
      : UnaryNode(std::move(input)), fn_(std::move(fn)), deterministic_(deterministic) {
    if (!fn_) throw InvalidArgumentError("map: empty function");
    if (num_parallel_calls == kAutotune) num_parallel_calls = hardware_threads();
    if (num_parallel_calls <= 0) {
      throw InvalidArgumentError(str_cat("map: num_parallel_calls is ", num_parallel_calls,
                                         "; expected a positive number or kAutotune"));
    }
    num_parallel_calls_ = num_parallel_calls;
  }

  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "map"; }
  // A map function is a function of its element (TensorFlow assumes as much to resume): the
  // element is made again by applying it again.
  bool can_fetch() const override { return input_->can_fetch(); }
  Element fetch(std::span<const int64_t> origin) const override {
    return apply(input_->fetch(origin));
  }
  // fn of `e`, with e's origin.
  Element apply(Element e) const {
    std::vector<int64_t> origin = std::move(e.origin);
    Element out = fn_(std::move(e));
    out.origin = std::move(origin);
    return out;
  }

  Dataset::MapFn fn_;
  int num_parallel_calls_ = 1;
  bool deterministic_;
};

class MapIterator : public IteratorNode {
 public:
  MapIterator(const MapNode& node, const IteratorContext& context)
      : IteratorNode("map"), node_(node), input_(node.input()->make_iterator(context)) {}

  std::optional<Element> next() override {
    auto e = input_->next();
    if (!e) return e;
    return node_.apply(std::move(*e));
  }
  void save_state(StateWriter& w) override { input_->save(w.child("input")); }
  void restore_state(const StateReader& r) override { input_->restore(r.child("input")); }

 private:
  const MapNode& node_;
  std::unique_ptr<IteratorNode> input_;
};

// Workers take input elements in order (one at a time, under input_mutex_), append a slot
// for each to `slots_` in that same order, and fill the slot when fn returns. The consumer
// takes the front slot once filled (or, unordered, the first filled one). At most
// 2 * num_parallel_calls slots exist at once, which bounds memory.
class ParallelMapIterator : public IteratorNode {
 public:
  ParallelMapIterator(const MapNode& node, const IteratorContext& context)
      : IteratorNode("parallel_map"),
        node_(node),
        input_(node.input()->make_iterator(context)),
        capacity_(2 * static_cast<size_t>(node.num_parallel_calls_)) {}

  ~ParallelMapIterator() override { stop_workers(); }

  std::optional<Element> next() override {
    std::unique_lock lock(mutex_);
    if (workers_.empty()) start_workers();
    while (true) {
      auto ready = slots_.end();
      if (node_.deterministic_) {
        if (!slots_.empty() && slots_.front()->done) ready = slots_.begin();
      } else {
        ready = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->done; });
      }
      if (ready != slots_.end()) {
        std::shared_ptr<Slot> slot = *ready;
        slots_.erase(ready);
        changed_.notify_all();
        lock.unlock();
        return slot->result.take();
      }
      if (slots_.empty() && input_done_) return std::nullopt;
      changed_.wait(lock);
    }
  }

  void save_state(StateWriter& w) override {
    std::unique_lock lock(mutex_);
    paused_ = true;
    changed_.wait(lock, [&] { return active_ == 0; });
    // Every slot is filled and no worker touches the input now.
    std::deque<BufferedResult> results;
    for (const auto& slot : slots_) results.push_back(slot->result);
    save_results(w, results, node_);
    w.write_int("input_done", input_done_);
    input_->save(w.child("input"));
    paused_ = false;
    changed_.notify_all();
  }

  void restore_state(const StateReader& r) override {
    stop_workers();  // workers restart with the next call to next()
    std::lock_guard lock(mutex_);
    input_->restore(r.child("input"));
    input_done_ = r.read_int("input_done") != 0;
    slots_.clear();
    for (BufferedResult& result : restore_results(r, node_)) {
      auto slot = std::make_shared<Slot>();
      slot->result = std::move(result);
      slot->done = true;
      slots_.push_back(std::move(slot));
    }
  }

 private:
  struct Slot {
    BufferedResult result;
    bool done = false;
  };

  void start_workers() {
    cancelled_ = false;
    for (int i = 0; i < node_.num_parallel_calls_; ++i) {
      workers_.emplace_back([this] { work(); });
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void work() {
    set_current_thread_name("cadre_map");
    // The workers share the intra-op budget, as replica threads do.
    ReplicaThreadScope share(node_.num_parallel_calls_);
    while (true) {
      std::shared_ptr<Slot> slot;
      std::optional<Element> input;
      {
        std::unique_lock input_lock(input_mutex_);
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] {
            return cancelled_ || (!paused_ && !input_done_ && slots_.size() < capacity_);
          });
          if (cancelled_ || input_done_) return;
          ++active_;
        }
        std::optional<Element> pulled;
        std::exception_ptr error;
        try {
          pulled = input_->next();
        } catch (...) {
          error = std::current_exception();
        }
        std::lock_guard lock(mutex_);
        if (!pulled && !error) {
          input_done_ = true;
          --active_;
          changed_.notify_all();
          continue;
        }
        slot = std::make_shared<Slot>();
        slots_.push_back(slot);
        if (error) {  // delivered at its position; later input elements still follow
          slot->result.error = error;
          slot->done = true;
          --active_;
          changed_.notify_all();
          continue;
        }
        input = std::move(pulled);
      }
      BufferedResult result = capture_result([&] { return node_.apply(std::move(*input)); });
      std::lock_guard lock(mutex_);
      slot->result = std::move(result);
      slot->done = true;
      --active_;
      changed_.notify_all();
    }
  }

  const MapNode& node_;
  std::unique_ptr<IteratorNode> input_;
  const size_t capacity_;

  std::mutex input_mutex_;  // serialises pulls from input_, so slots follow input order
  std::mutex mutex_;        // guards everything below
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Slot>> slots_;
  bool input_done_ = false;
  bool paused_ = false;
  bool cancelled_ = false;
  int active_ = 0;  // workers between taking an input element and filling its slot
  std::vector<std::thread> workers_;
};

std::unique_ptr<IteratorNode> MapNode::make_iterator(const IteratorContext& context) const {
  if (num_parallel_calls_ == 1) return std::make_unique<MapIterator>(*this, context);
  return std::make_unique<ParallelMapIterator>(*this, context);
}

}  // namespace

Dataset Dataset::map(MapFn fn, int num_parallel_calls, bool deterministic) const {
  return Dataset(
      std::make_shared<MapNode>(node_, std::move(fn), num_parallel_calls, deterministic));
}

}  // namespace cadre::io
