#include "io/auto_shard.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "cadre/base/errors.h"
#include "cadre/io/dataset_options.h"
#include "core/base/strings.h"
#include "io/dataset_node.h"
#include "io/pipeline_rewrite.h"
#include "io/shard_node.h"

namespace cadre::io {
namespace {

// Passes elements through unchanged and carries the pipeline's options.
class OptionsNode : public PassingNode<OptionsNode> {
 public:
  OptionsNode(NodePtr input, DatasetOptions options)
      : PassingNode(std::move(input)), options_(options) {}
  std::string_view kind() const override { return "options"; }
  std::unique_ptr<IteratorNode> make_iterator(const IteratorContext& context) const override {
    return input_->make_iterator(context);
  }
  const DatasetOptions& options() const { return options_; }

 private:
  DatasetOptions options_;
};

AutoShardPolicy policy_of(const NodePtr& root) {
  AutoShardPolicy policy = AutoShardPolicy::kAuto;
  // The options nearest the output win, as later with_options calls override earlier ones.
  walk(root, [&](const DatasetNode& node) {
    auto* options = dynamic_cast<const OptionsNode*>(&node);
    if (options) policy = options->options().auto_shard_policy;
    return options != nullptr;
  });
  return policy;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

}  // namespace

std::optional<ShardedDataset> shard_by_files(const Dataset& dataset, int64_t workers, int64_t index,
                                             std::string* problem) {
  std::vector<const FileSourceNode*> sources;
  walk(dataset.node(), [&](const DatasetNode& node) {
    if (auto* source = dynamic_cast<const FileSourceNode*>(&node)) sources.push_back(source);
    return false;
  });
  if (sources.empty()) {
    *problem = "no stage of the pipeline reads a list of files";
    return std::nullopt;
  }
  for (const FileSourceNode* source : sources) {
    if (static_cast<int64_t>(source->files().size()) < workers) {
      *problem = str_cat("its '", source->kind(), "' stage reads ", source->files().size(),
                         " file(s), fewer than the ", workers, " workers");
      return std::nullopt;
    }
  }
  std::vector<std::string> mine;
  size_t total = 0;
  std::map<const DatasetNode*, NodePtr> done;
  NodePtr root = rewrite(
      dataset.node(),
      [&](const NodePtr& node) -> NodePtr {
        auto* source = dynamic_cast<const FileSourceNode*>(node.get());
        if (!source) return nullptr;
        std::vector<std::string> files;
        for (size_t i = 0; i < source->files().size(); ++i) {
          if (static_cast<int64_t>(i) % workers == index) files.push_back(source->files()[i]);
        }
        total += source->files().size();
        for (const std::string& f : files) mine.push_back(base_name(f));
        return source->with_files(std::move(files));
      },
      done);
  constexpr size_t kNamesShown = 8;
  std::string names = join(std::vector<std::string>(
      mine.begin(),
      mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), kNamesShown))));
  if (mine.size() > kNamesShown) names += ", ...";
  return ShardedDataset{Dataset(root),
                        str_cat("FILE: ", mine.size(), " of ", total, " files (", names, ")")};
}

namespace {

// DATA: shard(workers, index) at the output, below trailing stages that map elements one
// for one.
ShardedDataset shard_data(const Dataset& dataset, int64_t workers, int64_t index) {
  std::function<NodePtr(const NodePtr&)> place = [&](const NodePtr& node) -> NodePtr {
    std::string_view kind = node->kind();
    if (kind == "map" || kind == "prefetch" || kind == "options") {
      return node->with_inputs({place(node->inputs().at(0))});
    }
    return std::make_shared<ShardNode>(node, workers, index);
  };
  NodePtr root = place(dataset.node());
  const DatasetNode* below = root.get();
  while (below->kind() != "shard") below = below->inputs().at(0).get();
  std::string_view of = below->inputs().at(0)->kind();
  return ShardedDataset{
      Dataset(root),
      str_cat("DATA: elements ", index, ", ", index + workers, ", ", index + 2 * workers,
              ", ... of the '", of, "' stage's output (every worker reads all of the input)")};
}

}  // namespace

Dataset Dataset::with_options(const DatasetOptions& options) const {
  return Dataset(std::make_shared<OptionsNode>(node_, options));
}

ShardedDataset auto_shard(const Dataset& dataset, int64_t num_workers, int64_t worker_index) {
  if (num_workers <= 0 || worker_index < 0 || worker_index >= num_workers) {
    throw InvalidArgumentError(str_cat("auto_shard: worker ", worker_index, " of ", num_workers,
                                       "; expected 0 <= worker < workers"));
  }
  if (num_workers == 1) return {dataset, "all of the input (the only worker)"};
  AutoShardPolicy policy = policy_of(dataset.node());
  if (policy == AutoShardPolicy::kOff) {
    return {dataset, "OFF: all of the input, as every worker does"};
  }
  if (policy == AutoShardPolicy::kAuto) {
    const ShardNode* own = nullptr;
    walk(dataset.node(), [&](const DatasetNode& node) {
      auto* shard = dynamic_cast<const ShardNode*>(&node);
      if (shard && shard->num_shards() == num_workers) own = shard;
      return own != nullptr;
    });
    if (own) {
      return {dataset, str_cat("the input_fn shards by itself: shard(", own->num_shards(), ", ",
                               own->index(), ")")};
    }
  }
  std::string problem;
  if (policy == AutoShardPolicy::kAuto || policy == AutoShardPolicy::kFile) {
    if (auto sharded = shard_by_files(dataset, num_workers, worker_index, &problem))
      return *sharded;
    if (policy == AutoShardPolicy::kFile) {
      throw InvalidArgumentError(str_cat("auto-shard policy FILE cannot divide the input among ",
                                         num_workers, " workers: ", problem,
                                         "; use more files, or the DATA or OFF policy"));
    }
  }
  ShardedDataset sharded = shard_data(dataset, num_workers, worker_index);
  if (!problem.empty()) sharded.plan += str_cat("; not FILE, since ", problem);
  return sharded;
}

}  // namespace cadre::io
