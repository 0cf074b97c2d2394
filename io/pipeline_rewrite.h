// Walking and rebuilding a pipeline's stages, for the rewrites that divide an input among
// workers (auto-sharding) or into virtual shards.
#pragma once

#include <functional>
#include <map>

#include "io/dataset_node.h"

namespace cadre::io {

// Visits every stage once, depending stages before their inputs; stops early when `visit`
// returns true, and says whether it did.
bool walk(const NodePtr& root, const std::function<bool(const DatasetNode&)>& visit);

// The pipeline with each stage for which `replace` returns a node replaced by it. Stages
// shared by several consumers are rewritten once (`done` remembers them), and unchanged
// stages are shared with the original, so a source's data is not loaded again.
NodePtr rewrite(const NodePtr& node, const std::function<NodePtr(const NodePtr&)>& replace,
                std::map<const DatasetNode*, NodePtr>& done);

}  // namespace cadre::io
