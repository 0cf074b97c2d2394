#include "io/virtual_shards.h"

#include <glog/logging.h>

#include <memory>
#include <set>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "io/auto_shard.h"
#include "io/dataset_node.h"
#include "io/pipeline_rewrite.h"
#include "io/shard_node.h"

namespace cadre::io {
namespace {

constexpr char kVirtualShardsKind[] = "virtual_shards";
constexpr char kVirtualShardsCount[] = "shards";

int64_t rows_of(const Element& element) {
  if (element.labels.defined() && element.labels.rank() > 0) return element.labels.dim(0);
  for (const auto& [name, value] : element.features) {
    if (value.rank() > 0) return value.dim(0);
  }
  return 1;
}

// Features and labels of the shards' elements, concatenated in shard order, and with
// `part_rows` the rows of each.
Element joined_parts(std::vector<Element>& parts, bool part_rows) {
  std::vector<int64_t> rows;
  if (part_rows) {
    for (const Element& part : parts) rows.push_back(rows_of(part));
  }
  Element joined;
  if (parts.size() == 1) {
    joined = std::move(parts[0]);
    if (part_rows) joined.features.set(kShardRowsFeature, Tensor::from_vector(rows));
    return joined;
  }
  for (const Element& part : parts) {
    if (part.features.names() != parts[0].features.names() ||
        part.labels.defined() != parts[0].labels.defined()) {
      throw InvalidArgumentError(str_cat(
          "input shards: the shards' elements differ: features [", join(parts[0].features.names()),
          "]", parts[0].labels.defined() ? " and labels" : "", " against [",
          join(part.features.names()), "]", part.labels.defined() ? " and labels" : ""));
    }
  }
  for (const auto& [name, first] : parts[0].features) {
    std::vector<Tensor> pieces;
    for (const Element& part : parts) pieces.push_back(part.features.at(name));
    joined.features.set(name, concat(pieces, 0));
  }
  if (parts[0].labels.defined()) {
    std::vector<Tensor> pieces;
    for (const Element& part : parts) pieces.push_back(part.labels);
    joined.labels = concat(pieces, 0);
  }
  if (part_rows) joined.features.set(kShardRowsFeature, Tensor::from_vector(rows));
  return joined;
}

// JoinedShardsNode's iterator: each element joins the next of every shard (of every shard
// not ended yet, with to_every_end).
class JoinedShardsIterator : public IteratorNode {
 public:
  JoinedShardsIterator(std::vector<NodePtr> nodes, int64_t num_shards, int64_t first,
                       bool part_rows, bool to_every_end, const IteratorContext& context)
      : IteratorNode(kVirtualShardsKind),
        num_shards_(num_shards),
        first_(first),
        part_rows_(part_rows),
        to_every_end_(to_every_end),
        nodes_(std::move(nodes)),
        context_(context) {
    for (const NodePtr& shard : nodes_) shards_.push_back(shard->make_iterator(context));
    ended_.assign(shards_.size(), false);
  }
  std::optional<Element> next() override {
    if (done_) return std::nullopt;
    if (to_every_end_) return next_of_those_left();
    std::vector<Element> parts;
    parts.reserve(shards_.size());
    for (auto& shard : shards_) {
      std::optional<Element> part = shard->next();
      // A step needs every shard's share: the shards that still have elements keep
      // them, as a batch with drop_remainder keeps the remainder.
      if (!part) {
        done_ = true;
        return std::nullopt;
      }
      parts.push_back(std::move(*part));
    }
    return joined_parts(parts, part_rows_);
  }
  void prepare_save() override {
    for (auto& shard : shards_) shard->prepare_save();
  }
  void save_state(StateWriter& w) override {
    w.write_int(kVirtualShardsCount, num_shards_);
    for (size_t i = 0; i < shards_.size(); ++i) shards_[i]->save(w.child(name(i)));
  }
  void restore_state(const StateReader& r) override {
    StateReader behind = r.child(kShardsBehind);
    std::vector<int64_t> fresh;
    for (size_t i = 0; i < shards_.size(); ++i) {
      // A shard the state has no position for starts at its beginning: right where its
      // worker of a ps job took no step, a second reading where a checkpoint lost it.
      if (!r.child(name(i)).contains("kind")) {
        shards_[i] = nodes_[i]->make_iterator(context_);
        fresh.push_back(first_ + static_cast<int64_t>(i));
        continue;
      }
      shards_[i]->restore(r.child(name(i)));
      if (!behind.contains(name(i))) continue;
      const int64_t elements = behind.read_int(name(i));
      if (elements < 0) {
        throw InvalidArgumentError(
            str_cat("input ", name(i), " is ", elements, " elements behind; expected 0 or more"));
      }
      for (int64_t n = elements; n > 0 && shards_[i]->next(); --n) {
      }
    }
    if (!fresh.empty()) {
      LOG(WARNING) << "input shard(s) " << join(fresh, ",") << " of " << num_shards_
                   << ": the state restored has no position for them (their worker of a ps job "
                      "never stepped, or a checkpoint without every worker's position); read "
                      "from their beginning";
    }
    done_ = false;
    ended_.assign(shards_.size(), false);
  }

 private:
  // The shards that have not ended yet, joined: a worker's shards may be at different
  // places (a resize handed them over from workers that had stepped more or less), and
  // each is read to its end.
  std::optional<Element> next_of_those_left() {
    std::vector<Element> parts;
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (ended_[i]) continue;
      std::optional<Element> part = shards_[i]->next();
      if (part) {
        parts.push_back(std::move(*part));
      } else {
        ended_[i] = true;
      }
    }
    if (parts.empty()) {
      done_ = true;
      return std::nullopt;
    }
    return joined_parts(parts, part_rows_);
  }
  std::string name(size_t i) const { return str_cat("shard_", first_ + static_cast<int64_t>(i)); }
  int64_t num_shards_, first_;
  bool part_rows_, to_every_end_;
  std::vector<NodePtr> nodes_;
  IteratorContext context_;
  std::vector<std::unique_ptr<IteratorNode>> shards_;
  std::vector<bool> ended_;  // to_every_end_: each shard's
  bool done_ = false;
};

class JoinedShardsNode : public DatasetNode {
 public:
  JoinedShardsNode(std::vector<NodePtr> shards, int64_t num_shards, int64_t first, bool part_rows,
                   bool to_every_end)
      : shards_(std::move(shards)),
        num_shards_(num_shards),
        first_(first),
        part_rows_(part_rows),
        to_every_end_(to_every_end) {}
  std::string_view kind() const override { return kVirtualShardsKind; }
  std::vector<NodePtr> inputs() const override { return shards_; }
  NodePtr with_inputs(std::vector<NodePtr> inputs) const override {
    return std::make_shared<JoinedShardsNode>(std::move(inputs), num_shards_, first_, part_rows_,
                                              to_every_end_);
  }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    return std::make_unique<JoinedShardsIterator>(shards_, num_shards_, first_, part_rows_,
                                                  to_every_end_, context);
  }

 private:
  std::vector<NodePtr> shards_;
  int64_t num_shards_, first_;
  bool part_rows_, to_every_end_;
};

// The pipeline's own shard(num_shards, index) stage, if it has one.
const ShardNode* own_shard(const Dataset& dataset, int64_t num_shards, int64_t index) {
  const ShardNode* own = nullptr;
  walk(dataset.node(), [&](const DatasetNode& node) {
    auto* shard = dynamic_cast<const ShardNode*>(&node);
    if (shard && shard->num_shards() == num_shards && shard->index() == index) own = shard;
    return own != nullptr;
  });
  return own;
}

// shard(num_shards, index) right after every source: each shard then runs the whole pipeline
// over its elements, and a source that reads rows in memory skips the others' for nothing.
NodePtr shard_sources(const NodePtr& root, int64_t num_shards, int64_t index) {
  std::map<const DatasetNode*, NodePtr> done;
  return rewrite(
      root,
      [&](const NodePtr& node) -> NodePtr {
        if (!node->inputs().empty()) return nullptr;
        return std::make_shared<ShardNode>(node, num_shards, index);
      },
      done);
}

}  // namespace

void set_shards_behind(IteratorState& state, int64_t elements) {
  std::set<std::string> shards;
  for (const auto& [key, value] : state) {
    if (key.starts_with("shard_") && key.find('/') != std::string::npos) {
      shards.insert(key.substr(0, key.find('/')));
    }
  }
  for (const std::string& shard : shards) {
    StateReader saved(state, str_cat(kShardsBehind, "/"));
    const int64_t already = saved.contains(shard) ? saved.read_int(shard) : 0;
    StateWriter(state).child(kShardsBehind).write_int(shard, already + elements);
  }
}

int64_t saved_virtual_shards(const IteratorState& state) {
  StateReader reader(state);
  if (!reader.contains("kind") || reader.read_string("kind") != kVirtualShardsKind) return 0;
  int64_t shards = reader.read_int(kVirtualShardsCount);
  if (shards <= 0 || shards > kMaxInputShards) {
    throw DataLossError(str_cat("iterator state entry '", kVirtualShardsCount, "' is ", shards,
                                "; expected 1 to ", kMaxInputShards, " input shards"));
  }
  return shards;
}

std::pair<int64_t, int64_t> owned_shards(int64_t num_shards, int64_t workers, int64_t worker) {
  return {num_shards * worker / workers, num_shards * (worker + 1) / workers};
}

VirtualShards read_virtual_shards(const Dataset& dataset, int64_t num_shards, int64_t first,
                                  int64_t last, bool part_rows, bool to_every_end) {
  if (num_shards <= 0 || num_shards > kMaxInputShards || first < 0 || last > num_shards ||
      first >= last) {
    throw InvalidArgumentError(str_cat("input shards [", first, ", ", last, ") of ", num_shards,
                                       "; expected 0 <= first < last <= shards"));
  }
  std::vector<NodePtr> shards;
  std::string how;
  std::string problem;
  if (const ShardNode* own = own_shard(dataset, num_shards, first)) {
    how = "the input_fn's own shard stage";
    for (int64_t v = first; v < last; ++v) {
      std::map<const DatasetNode*, NodePtr> done;
      shards.push_back(rewrite(
          dataset.node(),
          [&](const NodePtr& node) -> NodePtr {
            if (node.get() != own) return nullptr;
            return std::make_shared<ShardNode>(own->input(), num_shards, v);
          },
          done));
    }
  } else if (shard_by_files(dataset, num_shards, first, &problem)) {
    how = "divided by files";
    for (int64_t v = first; v < last; ++v) {
      shards.push_back(shard_by_files(dataset, num_shards, v, &problem)->dataset.node());
    }
  } else {
    how = "divided element by element at the sources";
    bool generator =
        walk(dataset.node(), [](const DatasetNode& node) { return node.kind() == "generator"; });
    if (generator) {
      LOG(WARNING) << "input shards: every shard runs the pipeline's generator and keeps its "
                      "own elements; resuming is exact only if it yields the same sequence "
                      "every time";
    }
    for (int64_t v = first; v < last; ++v) {
      shards.push_back(shard_sources(dataset.node(), num_shards, v));
    }
  }
  std::string range = last - first == 1 ? str_cat(first) : str_cat(first, "-", last - 1);
  return {Dataset(std::make_shared<JoinedShardsNode>(std::move(shards), num_shards, first,
                                                     part_rows, to_every_end)),
          str_cat("input shard(s) ", range, " of ", num_shards, " (", how, ")")};
}

}  // namespace cadre::io
