// The stage behind Dataset::shard, visible to rewrites that recognise a pipeline's own
// sharding (auto-sharding leaves an input_fn that shards by itself alone).
#pragma once

#include <cstdint>

#include "cadre/base/errors.h"
#include "io/dataset_node.h"

namespace cadre::io {

// Elements i of the input with i % num_shards == index.
class ShardNode : public PassingNode<ShardNode> {
 public:
  // Throws InvalidArgumentError unless num_shards > 0 and 0 <= index < num_shards.
  ShardNode(NodePtr input, int64_t num_shards, int64_t index);
  std::string_view kind() const override { return "shard"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override;
  int64_t num_shards() const { return num_shards_; }
  int64_t index() const { return index_; }

 private:
  int64_t num_shards_, index_;
};

}  // namespace cadre::io
