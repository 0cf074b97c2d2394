#include "io/pipeline_rewrite.h"

#include <set>
#include <vector>

namespace cadre::io {

bool walk(const NodePtr& root, const std::function<bool(const DatasetNode&)>& visit) {
  std::vector<const DatasetNode*> pending{root.get()};
  std::set<const DatasetNode*> seen;
  while (!pending.empty()) {
    const DatasetNode* node = pending.back();
    pending.pop_back();
    if (!seen.insert(node).second) continue;
    if (visit(*node)) return true;
    for (const NodePtr& input : node->inputs()) pending.push_back(input.get());
  }
  return false;
}

NodePtr rewrite(const NodePtr& node, const std::function<NodePtr(const NodePtr&)>& replace,
                std::map<const DatasetNode*, NodePtr>& done) {
  if (auto it = done.find(node.get()); it != done.end()) return it->second;
  NodePtr result = replace(node);
  if (!result) {
    std::vector<NodePtr> inputs = node->inputs();
    bool changed = false;
    for (NodePtr& input : inputs) {
      NodePtr rewritten = rewrite(input, replace, done);
      changed |= rewritten != input;
      input = std::move(rewritten);
    }
    result = changed ? node->with_inputs(std::move(inputs)) : node;
  }
  done[node.get()] = result;
  return result;
}

}  // namespace cadre::io
