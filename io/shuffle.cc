// shuffle: uniform sampling from a buffer refilled from the input, driven by a Philox
// generator so that the order is reproducible from the seed and checkpointable.
//
// A buffer of rows (an in-memory source upstream) is a function of the generator's first
// state, the input's first position and the number of rows drawn since: its state is those
// few numbers, and a restore draws that many rows again (tens of nanoseconds each), rather
// than a save writing every row the buffer holds on the training thread. Past kReplayRows
// draws (a shuffle over a repeated input never starts over) the buffer is written as
// before, so that a restore never replays more than that.
#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "cadre/random/generator.h"
#include "core/base/strings.h"
#include "core/random/philox.h"
#include "io/dataset_node.h"
#include "io/saved_elements.h"

namespace cadre::io {
namespace {

// The most rows a restore draws again: about 0.1 s (docs/BENCHMARKS.md#input-pipeline,
// BM_RestoreShuffledPosition).
constexpr int64_t kReplayRows = int64_t{1} << 21;

class ShuffleNode : public PassingNode<ShuffleNode> {
 public:
  ShuffleNode(NodePtr input, int64_t buffer_size, uint64_t seed, bool reshuffle)
      : PassingNode(std::move(input)),
        buffer_size_(buffer_size),
        seed_(seed),
        reshuffle_(reshuffle) {
    if (buffer_size <= 0) {
      throw InvalidArgumentError(
          str_cat("shuffle: buffer_size is ", buffer_size, "; expected a positive number"));
    }
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  std::string_view kind() const override { return "shuffle"; }

  int64_t buffer_size_;
  uint64_t seed_;
  bool reshuffle_;
};

class ShuffleIterator : public IteratorNode {
 public:
  ShuffleIterator(const ShuffleNode& node, const IteratorContext& context)
      : IteratorNode("shuffle"),
        node_(node),
        context_(context),
        input_(node.input()->make_iterator(context)),
        // Each pass of an enclosing repeat draws from its own stream of the seed.
        generator_(node.seed_, node.reshuffle_ ? context.epoch_key : 0),
        first_(generator_.state()),
        by_row_(input_->yields_rows()) {}

  std::optional<Element> next() override {
    if (by_row_) {
      std::optional<int64_t> row = next_row();
      if (!row) return std::nullopt;
      return node_.input()->fetch({&*row, 1});
    }
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < node_.buffer_size_) {
      if (!pull()) break;
    }
    if (buffer_.empty()) return std::nullopt;
    size_t pick = uniform_index(buffer_.size());
    Element out = std::move(buffer_[pick]);
    if (pick != buffer_.size() - 1) buffer_[pick] = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }

  void save_state(StateWriter& w) override {
    bool replayable = by_row_ && drawn_ >= 0 && drawn_ <= kReplayRows;
    Generator::State g = replayable ? first_ : generator_.state();
    w.write_int("seed", static_cast<int64_t>(g.seed));
    w.write_int("stream", static_cast<int64_t>(g.stream));
    w.write_int("offset", static_cast<int64_t>(g.offset));
    if (replayable) {
      w.write_int("replay", drawn_);
      return;
    }
    w.write_int("input_done", input_done_);
    if (by_row_) {
      save_rows(w, "buffer", rows_);
    } else {
      save_elements(w, "buffer", buffer_, *node_.input());
    }
    input_->save(w.child("input"));
  }

  void restore_state(const StateReader& r) override {
    Generator::State g{static_cast<uint64_t>(r.read_int("seed")),
                       static_cast<uint64_t>(r.read_int("stream")),
                       static_cast<uint64_t>(r.read_int("offset"))};
    if (r.contains("replay")) {
      replay(g, r.read_int("replay"));
      return;
    }
    generator_.set_state(g);
    drawn_ = -1;  // the first state is not in this one: saves write the buffer from here on
    input_done_ = r.read_int("input_done") != 0;
    input_->restore(r.child("input"));
    buffer_ = restore_elements(r, "buffer", *node_.input());
    rows_.clear();
    if (!by_row_) return;
    // The same entry as the element buffer's: rows again, unless it holds something else.
    for (const Element& e : buffer_) {
      if (e.origin.size() != 1) {
        by_row_ = false;  // kept as elements from here on
        return;
      }
      rows_.push_back(e.origin[0]);
    }
    buffer_.clear();
  }

  bool yields_rows() const override { return by_row_; }
  // The buffer as rows, drawn exactly as next() draws elements (the same picks, the same
  // order), so that the two modes yield the same elements and save the same state.
  std::optional<int64_t> next_row() override {
    while (!input_done_ && static_cast<int64_t>(rows_.size()) < node_.buffer_size_) {
      std::optional<int64_t> row = input_->next_row();
      if (!row) {
        input_done_ = true;
        break;
      }
      rows_.push_back(*row);
    }
    if (rows_.empty()) return std::nullopt;
    size_t pick = uniform_index(rows_.size());
    int64_t row = rows_[pick];
    rows_[pick] = rows_.back();
    rows_.pop_back();
    if (drawn_ >= 0) ++drawn_;
    return row;
  }

 private:
  // From the first state `first` and a fresh input, draws `count` rows again.
  void replay(const Generator::State& first, int64_t count) {
    input_ = node_.input()->make_iterator(context_);
    if (!input_->yields_rows()) {
      throw InvalidArgumentError(
          "shuffle: the iterator state replays rows, but this pipeline's shuffle input does not "
          "yield rows of an in-memory source: restore the state into the pipeline that saved it");
    }
    if (count < 0 || count > kReplayRows) {
      throw DataLossError(str_cat("shuffle: the iterator state replays ", count,
                                  " rows; saves replay 0 to ", kReplayRows));
    }
    by_row_ = true;
    generator_.set_state(first);
    first_ = first;
    input_done_ = false;
    rows_.clear();
    buffer_.clear();
    drawn_ = 0;
    while (drawn_ < count) {
      if (!next_row()) {
        throw DataLossError(str_cat("shuffle: the iterator state replays ", count,
                                    " rows, but the input ends after ", drawn_));
      }
    }
  }

  bool pull() {
    auto e = input_->next();
    if (!e) {
      input_done_ = true;
      return false;
    }
    buffer_.push_back(std::move(*e));
    return true;
  }

  // Uniform in [0, n) from 64 random bits (bias below 2^-40 for any buffer that fits in
  // memory).
  size_t uniform_index(size_t n) {
    PhiloxKey key = generator_.reserve(1);
    philox::Block b = philox::block(key.key, key.offset);
    uint64_t bits = (uint64_t{b.v[0]} << 32) | b.v[1];
    return static_cast<size_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
  }

  const ShuffleNode& node_;
  IteratorContext context_;
  std::unique_ptr<IteratorNode> input_;
  Generator generator_;
  Generator::State first_;  // the generator's state when the input was fresh
  int64_t drawn_ = 0;       // rows drawn since; -1 when that is unknown (restored from a buffer)
  bool by_row_;
  std::vector<Element> buffer_;  // when !by_row_
  std::vector<int64_t> rows_;    // when by_row_
  bool input_done_ = false;
};

std::unique_ptr<IteratorNode> ShuffleNode::make_iterator(const IteratorContext& context) const {
  return std::make_unique<ShuffleIterator>(*this, context);
}

}  // namespace

Dataset Dataset::shuffle(int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration) const {
  return Dataset(std::make_shared<ShuffleNode>(node_, buffer_size, seed, reshuffle_each_iteration));
}

}  // namespace cadre::io
