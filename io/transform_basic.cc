// Transformations that pass elements through one at a time: filter, take, skip, shard,
// repeat, enumerate (concatenate and zip: io/combine.cc).
#include <glog/logging.h>

#include <functional>

#include "cadre/base/errors.h"
#include "cadre/io/dataset.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/shard_node.h"

namespace cadre::io {
namespace {

// A stage with one input, created with the stage's own context.
class UnaryIterator : public IteratorNode {
 public:
  UnaryIterator(std::string_view kind, const NodePtr& input, const IteratorContext& context)
      : IteratorNode(kind), input_(input->make_iterator(context)) {}

 protected:
  void save_input(StateWriter& w) { input_->save(w.child("input")); }
  void restore_input(const StateReader& r) { input_->restore(r.child("input")); }

  std::unique_ptr<IteratorNode> input_;
};

class FilterNode : public PassingNode<FilterNode> {
 public:
  FilterNode(NodePtr input, Dataset::Predicate predicate)
      : PassingNode(std::move(input)), predicate_(std::move(predicate)) {
    if (!predicate_) throw InvalidArgumentError("filter: empty predicate");
  }
  std::string_view kind() const override { return "filter"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public UnaryIterator {
     public:
      It(const FilterNode& n, const IteratorContext& c)
          : UnaryIterator("filter", n.input(), c), node_(n) {}
      std::optional<Element> next() override {
        while (auto e = input_->next()) {
          if (node_.predicate_(*e)) return e;
        }
        return std::nullopt;
      }
      void save_state(StateWriter& w) override { save_input(w); }
      void restore_state(const StateReader& r) override { restore_input(r); }

     private:
      const FilterNode& node_;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  Dataset::Predicate predicate_;
};

// take (limit >= 0 elements, then end) and skip (drop the first `count`).
class TakeSkipNode : public PassingNode<TakeSkipNode> {
 public:
  TakeSkipNode(NodePtr input, int64_t count, bool take)
      : PassingNode(std::move(input)), count_(count), take_(take) {}
  std::string_view kind() const override { return take_ ? "take" : "skip"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public UnaryIterator {
     public:
      It(const TakeSkipNode& n, const IteratorContext& c)
          : UnaryIterator(n.take_ ? "take" : "skip", n.input(), c), node_(n) {}
      std::optional<Element> next() override {
        if (node_.take_) {
          if (node_.count_ >= 0 && seen_ >= node_.count_) return std::nullopt;
          auto e = input_->next();
          if (e) ++seen_;
          return e;
        }
        if (node_.count_ < 0) return std::nullopt;
        while (seen_ < node_.count_) {
          if (!input_->next()) return std::nullopt;
          ++seen_;
        }
        return input_->next();
      }
      void save_state(StateWriter& w) override {
        w.write_int("seen", seen_);
        save_input(w);
      }
      void restore_state(const StateReader& r) override {
        seen_ = r.read_int("seen");
        restore_input(r);
      }

     private:
      const TakeSkipNode& node_;
      int64_t seen_ = 0;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  int64_t count_;
  bool take_;
};

class RepeatNode : public PassingNode<RepeatNode> {
 public:
  RepeatNode(NodePtr input, int64_t count) : PassingNode(std::move(input)), count_(count) {}
  std::string_view kind() const override { return "repeat"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public IteratorNode {
     public:
      It(const RepeatNode& n, const IteratorContext& c)
          : IteratorNode("repeat"), node_(n), context_(c) {
        start_pass();
      }
      std::optional<Element> next() override {
        std::optional<Element> e;
        through_passes([&](IteratorNode& in) { return (e = in.next()).has_value(); });
        return e;
      }
      // A fresh pass yields rows whenever this one does (only a restored shuffle may not).
      bool yields_rows() const override { return input_ && input_->yields_rows(); }
      std::optional<int64_t> next_row() override {
        std::optional<int64_t> row;
        through_passes([&](IteratorNode& in) {
          CHECK(in.yields_rows()) << "a pass of repeat without rows";
          return (row = in.next_row()).has_value();
        });
        return row;
      }
      void save_state(StateWriter& w) override {
        w.write_int("pass", pass_);
        w.write_int("in_pass", in_pass_);
        w.write_int("active", input_ != nullptr);
        if (input_) input_->save(w.child("input"));
      }
      void restore_state(const StateReader& r) override {
        pass_ = r.read_int("pass");
        input_.reset();
        if (r.read_int("active") != 0) {
          start_pass();
          if (!input_) {
            throw InvalidArgumentError(str_cat("iterator state: repeat's pass ", pass_,
                                               " is past its count of ", node_.count_));
          }
          input_->restore(r.child("input"));
        }
        in_pass_ = r.read_int("in_pass");
      }

     private:
      // Calls `take` on the current pass until it gets something, moving on to the next
      // pass at each one's end; false once the passes are over.
      bool through_passes(const std::function<bool(IteratorNode&)>& take) {
        while (input_) {
          if (take(*input_)) {
            ++in_pass_;
            return true;
          }
          // An empty pass would repeat forever without producing anything: stop instead.
          bool empty_pass = in_pass_ == 0;
          ++pass_;
          input_.reset();
          if (!empty_pass) start_pass();
        }
        return false;
      }

      void start_pass() {
        in_pass_ = 0;
        if (node_.count_ >= 0 && pass_ >= node_.count_) return;
        IteratorContext c = context_;
        c.epoch_key = next_epoch_key(context_.epoch_key, pass_);
        input_ = node_.input()->make_iterator(c);
      }

      const RepeatNode& node_;
      IteratorContext context_;
      std::unique_ptr<IteratorNode> input_;
      int64_t pass_ = 0, in_pass_ = 0;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  int64_t count_;
};

class EnumerateNode : public UnaryNode<EnumerateNode> {
 public:
  EnumerateNode(NodePtr input, int64_t start, std::string name)
      : UnaryNode(std::move(input)), start_(start), name_(std::move(name)) {}
  std::string_view kind() const override { return "enumerate"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    class It : public UnaryIterator {
     public:
      It(const EnumerateNode& n, const IteratorContext& c)
          : UnaryIterator("enumerate", n.input(), c), node_(n), next_index_(n.start_) {}
      std::optional<Element> next() override {
        auto e = input_->next();
        if (!e) return e;
        if (e->features.contains(node_.name_)) {
          throw InvalidArgumentError(str_cat("enumerate: the elements already have a feature '",
                                             node_.name_, "'; pass another name"));
        }
        e->features.set(node_.name_, Tensor::scalar<int64_t>(next_index_++));
        return e;
      }
      void save_state(StateWriter& w) override {
        w.write_int("next_index", next_index_);
        save_input(w);
      }
      void restore_state(const StateReader& r) override {
        next_index_ = r.read_int("next_index");
        restore_input(r);
      }

     private:
      const EnumerateNode& node_;
      int64_t next_index_;
    };
    return std::make_unique<It>(*this, context);
  }

 private:
  int64_t start_;
  std::string name_;
};

}  // namespace

ShardNode::ShardNode(NodePtr input, int64_t num_shards, int64_t index)
    : PassingNode(std::move(input)), num_shards_(num_shards), index_(index) {
  if (num_shards <= 0 || index < 0 || index >= num_shards) {
    throw InvalidArgumentError(str_cat("shard(", num_shards, ", ", index,
                                       "): expected num_shards > 0 and 0 <= index < num_shards"));
  }
}

std::unique_ptr<IteratorNode> ShardNode::make_iterator(const IteratorContext& context) const {
  class It : public UnaryIterator {
   public:
    It(const ShardNode& n, const IteratorContext& c)
        : UnaryIterator("shard", n.input(), c), node_(n) {}
    std::optional<Element> next() override {
      // The other workers' elements are skipped, not made (a batch of rows then gathers
      // only this worker's batches).
      while (!ours()) {
        if (!input_->skip()) return std::nullopt;
        ++position_;
      }
      std::optional<Element> e = input_->next();
      if (e) ++position_;
      return e;
    }
    bool yields_rows() const override { return input_->yields_rows(); }
    std::optional<int64_t> next_row() override {
      while (auto row = input_->next_row()) {
        bool mine = ours();
        ++position_;
        if (mine) return row;
      }
      return std::nullopt;
    }
    void save_state(StateWriter& w) override {
      w.write_int("position", position_);
      save_input(w);
    }
    void restore_state(const StateReader& r) override {
      position_ = r.read_int("position");
      restore_input(r);
    }

   private:
    // position_ counts input elements consumed; ours are those at index mod num_shards.
    bool ours() const { return position_ % node_.num_shards_ == node_.index_; }

    const ShardNode& node_;
    int64_t position_ = 0;
  };
  return std::make_unique<It>(*this, context);
}

Dataset Dataset::filter(Predicate predicate) const {
  return Dataset(std::make_shared<FilterNode>(node_, std::move(predicate)));
}
Dataset Dataset::take(int64_t count) const {
  return Dataset(std::make_shared<TakeSkipNode>(node_, count, /*take=*/true));
}
Dataset Dataset::skip(int64_t count) const {
  return Dataset(std::make_shared<TakeSkipNode>(node_, count, /*take=*/false));
}
Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  return Dataset(std::make_shared<ShardNode>(node_, num_shards, index));
}
Dataset Dataset::repeat(int64_t count) const {
  return Dataset(std::make_shared<RepeatNode>(node_, count));
}
Dataset Dataset::enumerate(int64_t start, const std::string& name) const {
  return Dataset(std::make_shared<EnumerateNode>(node_, start, name));
}
}  // namespace cadre::io
