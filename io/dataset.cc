#include "cadre/io/dataset.h"

#include "cadre/base/errors.h"
#include "cadre/io/input_context.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"

namespace cadre::io {

void IteratorNode::save(const StateWriter& writer) {
  StateWriter w = writer;
  w.write_string("kind", kind_);
  save_state(w);
}

void IteratorNode::restore(const StateReader& reader) {
  std::string saved = reader.read_string("kind");
  if (saved != kind_) {
    throw InvalidArgumentError(str_cat("iterator state was saved from a '", saved,
                                       "' stage where this pipeline has a '", kind_,
                                       "' stage: restore it into the pipeline that saved it"));
  }
  restore_state(reader);
}

NodePtr DatasetNode::with_inputs(std::vector<NodePtr> inputs) const {
  throw InternalError(str_cat("the '", kind(), "' stage has no inputs to replace"));
}

Element DatasetNode::fetch(std::span<const int64_t> origin) const {
  throw InternalError(str_cat("the '", kind(), "' stage cannot fetch elements by origin"));
}

Element DatasetNode::fetch_rows(std::span<const int64_t>) const {
  throw InternalError(str_cat("the '", kind(), "' stage cannot fetch rows"));
}

uint64_t next_epoch_key(uint64_t epoch_key, int64_t pass) {
  // splitmix64 of the pair: distinct passes give unrelated keys.
  uint64_t z = epoch_key * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(pass) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Iterator::Iterator(std::shared_ptr<const DatasetNode> dataset, std::unique_ptr<IteratorNode> root)
    : dataset_(std::move(dataset)), root_(std::move(root)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator::~Iterator() = default;

Iterator& Iterator::operator=(Iterator&& other) noexcept {
  // The old walk (and its threads) ends before the dataset it walks may be released.
  root_ = std::move(other.root_);
  dataset_ = std::move(other.dataset_);
  return *this;
}

std::optional<Element> Iterator::next() {
  if (!root_) throw FailedPreconditionError("Iterator::next on a moved-from iterator");
  return root_->next();
}

void Iterator::prepare_save() {
  if (!root_) throw FailedPreconditionError("Iterator::prepare_save on a moved-from iterator");
  root_->prepare_save();
}

IteratorState Iterator::save() {
  if (!root_) throw FailedPreconditionError("Iterator::save on a moved-from iterator");
  IteratorState state;
  root_->save(StateWriter(state));
  return state;
}

void Iterator::restore(const IteratorState& state) {
  if (!root_) throw FailedPreconditionError("Iterator::restore on a moved-from iterator");
  root_->restore(StateReader(state));
}

Dataset::Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {
  if (!node_) throw InvalidArgumentError("Dataset: null node");
}

Iterator Dataset::make_iterator() const { return Iterator(node_, node_->make_iterator({})); }

int64_t InputContext::per_replica_batch_size(int64_t global_batch_size) const {
  if (num_replicas_in_sync <= 0 || global_batch_size % num_replicas_in_sync != 0) {
    throw InvalidArgumentError(str_cat("the global batch size ", global_batch_size,
                                       " does not divide evenly among ", num_replicas_in_sync,
                                       " replicas in sync (with RunConfig.input_shards: among the "
                                       "input shards, which must divide the global batch)"));
  }
  return global_batch_size / num_replicas_in_sync;
}

}  // namespace cadre::io
