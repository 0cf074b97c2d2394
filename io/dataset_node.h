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
#include <string_view>

#include "io/element.h"
#include "io/iterator_state.h"

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

  std::string_view kind() const { return kind_; }

 protected:
  virtual void save_state(StateWriter& writer) = 0;
  virtual void restore_state(const StateReader& reader) = 0;

 private:
  std::string_view kind_;
};

class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const = 0;
};

// Mixes a pass number into an epoch key (for repeat).
uint64_t next_epoch_key(uint64_t epoch_key, int64_t pass);

}  // namespace cadre::io
