// The stages behind a Dataset, for code that adds a source or a transformation.
//
// A DatasetNode describes one stage and is immutable once built: Datasets share nodes, and
// any number of iterators may walk one node at once. An IteratorNode is one walk; it owns
// the iterators of its inputs. Iterator nodes are used by one thread at a time (their own
// background threads aside).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/io/element.h"
#include "cadre/io/iterator_state.h"

namespace cadre::io {

struct IteratorContext {
  // Distinguishes the passes of enclosing repeats: shuffles that reshuffle each iteration
  // derive their order from their seed and this key, so that every pass differs and a
  // restored iterator finds the same order again.
  uint64_t epoch_key = 0;
};

class IteratorNode {
 public:
  // `kind` names the stage ("shuffle"); it must outlive the node (a literal).
  explicit IteratorNode(std::string_view kind) : kind_(kind) {}
  virtual ~IteratorNode() = default;
  IteratorNode(const IteratorNode&) = delete;
  IteratorNode& operator=(const IteratorNode&) = delete;

  // The next element, or nullopt once the input is exhausted (and on every call after).
  // Errors of this stage or an upstream one propagate as exceptions.
  virtual std::optional<Element> next() = 0;

  // Records this stage's position (and, through children, its inputs') under `writer`.
  // Called between next() calls; stages with threads pause them while they save.
  void save(const StateWriter& writer);
  // Moves to the position `reader` holds; throws InvalidArgumentError when the state was
  // saved from a different kind of stage.
  void restore(const StateReader& reader);
  // A save() is coming (Iterator::prepare_save); stages with background threads may get
  // ready for it there.
  virtual void prepare_save() {}

  // Whether next_row() may stand in for next(): every element is a row of an in-memory
  // source, which the node's fetch() makes again from the one-word origin next_row()
  // returns, and its fetch_rows() batches. A shuffle then holds its buffer as rows (8 bytes
  // each, not an element whose parts lie all over the heap) and makes each element as it
  // leaves; a batch gathers the rows without making elements.
  virtual bool yields_rows() const { return false; }
  // The next element's row, without making the element; nullopt at the end. Moves the
  // position as next() does. Called only when yields_rows().
  virtual std::optional<int64_t> next_row() { return std::nullopt; }

  // Moves past the next element as next() does, without making it where the stage can (a
  // batch of rows picks its rows and gathers nothing); false at the end. A shard calls it
  // for the elements other workers take.
  virtual bool skip() { return next().has_value(); }

  std::string_view kind() const { return kind_; }

 protected:
  virtual void save_state(StateWriter& writer) = 0;
  virtual void restore_state(const StateReader& reader) = 0;

 private:
  std::string_view kind_;
};

class DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const = 0;

  // What rewrites of a pipeline (auto-sharding across workers) walk and rebuild it by.
  // The stage's name, as its iterators report it ("batch").
  virtual std::string_view kind() const = 0;
  // Its inputs in order; none for a source, and none for a stage that hides its input from
  // rewrites (a file cache, whose file holds what the input produced when it was written).
  virtual std::vector<NodePtr> inputs() const { return {}; }
  // The same stage over other inputs, as many as inputs() returned. Only asked of stages
  // that have inputs; the default throws InternalError.
  virtual NodePtr with_inputs(std::vector<NodePtr> inputs) const;

  // Whether fetch() makes this stage's elements again from their Element::origin, which is
  // what lets iterator state hold origins instead of elements. Stages whose elements are a
  // function of their origin alone say so: sources that can read at an offset, and stages
  // that pass elements on (shuffle, repeat, prefetch) or transform each on its own (map,
  // batch) over such inputs. False for anything that depends on position (enumerate) or on
  // other elements (zip), and by default.
  virtual bool can_fetch() const { return false; }
  // The element whose origin is `origin` (with that origin), as this stage produced it.
  // Only asked when can_fetch(); throws DataLossError when the origin no longer names an
  // element (a file that changed since the state was saved).
  virtual Element fetch(std::span<const int64_t> origin) const;
  // For a batch of rows (from iterators that yields_rows()): the element batch would make
  // of fetch() of each row, gathered straight from the source without making the elements.
  virtual Element fetch_rows(std::span<const int64_t> rows) const;
};

// A stage with one input. Self must be copyable: with_inputs copies it onto the new input.
template <typename Self>
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(NodePtr input) : input_(std::move(input)) {}
  std::vector<NodePtr> inputs() const override { return {input_}; }
  NodePtr with_inputs(std::vector<NodePtr> inputs) const override {
    auto copy = std::make_shared<Self>(static_cast<const Self&>(*this));
    copy->input_ = std::move(inputs.at(0));
    return copy;
  }
  const NodePtr& input() const { return input_; }

 protected:
  NodePtr input_;
};

// A stage that hands its input's elements on unchanged (or drops some), so that its
// elements are fetched from its input.
template <typename Self>
class PassingNode : public UnaryNode<Self> {
 public:
  using UnaryNode<Self>::UnaryNode;
  bool can_fetch() const override { return this->input_->can_fetch(); }
  Element fetch(std::span<const int64_t> origin) const override {
    return this->input_->fetch(origin);
  }
  Element fetch_rows(std::span<const int64_t> rows) const override {
    return this->input_->fetch_rows(rows);
  }
};

// A source that reads a list of files, which auto-sharding divides among workers.
class FileSourceNode : public DatasetNode {
 public:
  virtual const std::vector<std::string>& files() const = 0;
  // The same source over other files.
  virtual NodePtr with_files(std::vector<std::string> files) const = 0;
};

// Mixes a pass number into an epoch key (for repeat).
uint64_t next_epoch_key(uint64_t epoch_key, int64_t pass);

}  // namespace cadre::io
