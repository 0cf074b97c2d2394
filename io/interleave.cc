// interleave: round-robin over the datasets that a function makes of input elements (for
// example one TFRecord dataset per file name).
#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/saved_elements.h"

namespace cadre::io {
namespace {

class InterleaveNode : public UnaryNode<InterleaveNode> {
 public:
  InterleaveNode(NodePtr input, Dataset::InterleaveFn fn, int64_t cycle_length,
                 int64_t block_length)
      : UnaryNode(std::move(input)),
        fn_(std::move(fn)),
        cycle_length_(cycle_length),
        block_length_(block_length) {
    if (!fn_) throw InvalidArgumentError("interleave: empty function");
    if (cycle_length <= 0 || block_length <= 0) {
      throw InvalidArgumentError(str_cat("interleave: cycle_length ", cycle_length,
                                         " and block_length ", block_length, " must be positive"));
    }
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "interleave"; }

  // An element's origin is the length of its input element's origin, that origin, then the
  // element's origin in the dataset made of it.
  bool can_fetch() const override { return input_->can_fetch(); }
  Element fetch(std::span<const int64_t> origin) const override {
    auto words = origin.empty() ? uint64_t{0} : static_cast<uint64_t>(origin[0]);
    if (words == 0 || words >= origin.size()) {
      throw DataLossError("interleave: the origin of an element is damaged");
    }
    NodePtr dataset = fn_(input_->fetch(origin.subspan(1, words))).node();
    if (!dataset->can_fetch()) {
      throw DataLossError(
          "interleave: the dataset made of an input element cannot fetch by origin");
    }
    Element e = dataset->fetch(origin.subspan(1 + words));
    e.origin.assign(origin.begin(), origin.end());
    return e;
  }

  Dataset::InterleaveFn fn_;
  int64_t cycle_length_, block_length_;
};

class InterleaveIterator : public IteratorNode {
 public:
  InterleaveIterator(const InterleaveNode& node, const IteratorContext& context)
      : IteratorNode("interleave"),
        node_(node),
        context_(context),
        input_(node.input()->make_iterator(context)),
        slots_(static_cast<size_t>(node.cycle_length_)) {}

  std::optional<Element> next() override {
    while (!input_done_ || open_ > 0) {
      Slot& slot = slots_[cycle_index_];
      if (slot.iterator) {
        if (auto e = slot.iterator->next()) {
          if (++block_index_ == node_.block_length_) advance();
          set_origin(slot, *e);
          return e;
        }
        // Exhausted: the slot is refilled from the input when the cycle comes back to it.
        close(slot);
        --open_;
        advance();
      } else if (!input_done_) {
        auto source = input_->next();
        if (!source) {
          input_done_ = true;
        } else {
          open(slot, std::move(*source));
        }
      } else {
        advance();
      }
    }
    return std::nullopt;
  }

  void save_state(StateWriter& w) override {
    w.write_int("cycle_index", cycle_index_);
    w.write_int("block_index", block_index_);
    w.write_int("input_done", input_done_);
    input_->save(w.child("input"));
    for (size_t i = 0; i < slots_.size(); ++i) {
      StateWriter sw = w.child(str_cat("slot", i));
      sw.write_int("open", slots_[i].iterator != nullptr);
      if (!slots_[i].iterator) continue;
      sw.write_elements("source", {slots_[i].source});
      sw.write_string("source_origin", encode_origin(slots_[i].source.origin));
      slots_[i].iterator->save(sw.child("iterator"));
    }
  }

  void restore_state(const StateReader& r) override {
    cycle_index_ = static_cast<size_t>(r.read_int("cycle_index"));
    block_index_ = r.read_int("block_index");
    input_done_ = r.read_int("input_done") != 0;
    input_->restore(r.child("input"));
    open_ = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      StateReader sr = r.child(str_cat("slot", i));
      close(slots_[i]);
      if (sr.read_int("open") == 0) continue;
      std::vector<Element> source = sr.read_elements("source");
      if (source.size() != 1) {
        throw InvalidArgumentError(
            str_cat("interleave: slot ", i, " of the saved state is damaged"));
      }
      if (sr.contains("source_origin")) {
        source.front().origin = decode_origin(sr.read_string("source_origin"),
                                              str_cat("interleave slot ", i, "'s source origin"));
      }
      open(slots_[i], std::move(source.front()));
      slots_[i].iterator->restore(sr.child("iterator"));
    }
  }

 private:
  struct Slot {
    Element source;  // the input element the dataset was made from, to remake it on restore
    std::shared_ptr<const DatasetNode> dataset;  // outlives `iterator`, declared first
    std::unique_ptr<IteratorNode> iterator;
    bool can_fetch = false;  // the slot's elements can have origins (see InterleaveNode)
  };

  void open(Slot& slot, Element source) {
    Dataset dataset = node_.fn_(source);
    slot.source = std::move(source);
    slot.dataset = dataset.node();
    slot.iterator = slot.dataset->make_iterator(context_);
    slot.can_fetch = !slot.source.origin.empty() && slot.dataset->can_fetch();
    ++open_;
  }

  static void set_origin(const Slot& slot, Element& e) {
    if (!slot.can_fetch || e.origin.empty()) {
      e.origin.clear();
      return;
    }
    const std::vector<int64_t>& outer = slot.source.origin;
    std::vector<int64_t> origin;
    origin.reserve(1 + outer.size() + e.origin.size());
    origin.push_back(static_cast<int64_t>(outer.size()));
    origin.insert(origin.end(), outer.begin(), outer.end());
    origin.insert(origin.end(), e.origin.begin(), e.origin.end());
    e.origin = std::move(origin);
  }

  // Member-wise assignment would release the dataset before its iterator.
  static void close(Slot& slot) {
    slot.iterator.reset();
    slot.dataset.reset();
    slot.source = Element();
  }

  void advance() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % slots_.size();
  }

  const InterleaveNode& node_;
  IteratorContext context_;
  std::unique_ptr<IteratorNode> input_;
  std::vector<Slot> slots_;
  size_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t open_ = 0;
  bool input_done_ = false;
};

std::unique_ptr<IteratorNode> InterleaveNode::make_iterator(const IteratorContext& context) const {
  return std::make_unique<InterleaveIterator>(*this, context);
}

}  // namespace

Dataset Dataset::interleave(InterleaveFn fn, int64_t cycle_length, int64_t block_length) const {
  return Dataset(
      std::make_shared<InterleaveNode>(node_, std::move(fn), cycle_length, block_length));
}

}  // namespace cadre::io
