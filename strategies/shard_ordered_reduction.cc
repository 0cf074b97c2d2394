// ReplicaContext::apply_shard_gradients: the reduction of deterministic steps. An all-reduce
// adds the workers' sums in an order that follows the number of workers, and floating-point
// addition is not associative. Here the input shards' gradient sums are added along one fixed
// binary tree over the shards: a worker adds the subtrees that lie within its shards itself
// and sends those (one when the workers divide a power-of-two number of shards evenly, a few
// otherwise), and every worker adds the rest of the tree alike. Each node is always the sum
// of its two children, so the root is the same bits for any number of workers.
#include <map>
#include <string>
#include <utility>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/math.h"
#include "cadre/strategies/replica_context.h"
#include "core/base/strings.h"
#include "io/element_codec.h"
#include "strategies/replica_group.h"
#include "strategies/strategy_extended.h"

namespace cadre {
namespace {

using Sums = std::vector<Tensor>;      // per variable; undefined: no gradient
using Node = std::pair<int, int64_t>;  // (level, index): shards [index << level, +1 << level)

Sums added(Sums left, const Sums& right) {
  if (left.empty()) return right;
  for (size_t i = 0; i < left.size() && i < right.size(); ++i) {
    if (right[i].defined()) left[i] = left[i].defined() ? left[i] + right[i] : right[i];
  }
  return left;
}

// The subtree of `node` from the leaves in `leaves` (shard -> sums); shards past the last
// are empty.
Sums subtree(Node node, const std::map<int64_t, Sums>& leaves) {
  auto [level, index] = node;
  if (level == 0) {
    auto it = leaves.find(index);
    return it == leaves.end() ? Sums() : it->second;
  }
  return added(subtree({level - 1, 2 * index}, leaves),
               subtree({level - 1, 2 * index + 1}, leaves));
}

// The largest nodes whose shards lie within [first, last), left to right.
void cover(Node node, int64_t first, int64_t last, std::vector<Node>* out) {
  auto [level, index] = node;
  int64_t begin = index << level, end = (index + 1) << level;
  if (end <= first || begin >= last) return;
  if (begin >= first && end <= last) {
    out->push_back(node);
    return;
  }
  cover({level - 1, 2 * index}, first, last, out);
  cover({level - 1, 2 * index + 1}, first, last, out);
}

// The tree's value at `node`, from the nodes the workers sent.
Sums combined(Node node, const std::map<Node, Sums>& sent) {
  if (auto it = sent.find(node); it != sent.end()) return it->second;
  if (node.first == 0) return Sums();
  return added(combined({node.first - 1, 2 * node.second}, sent),
               combined({node.first - 1, 2 * node.second + 1}, sent));
}

std::string gradient_key(size_t i) { return str_cat("g", i); }

}  // namespace

void ReplicaContext::apply_shard_gradients(nn::Optimizer& optimizer, int64_t first_shard,
                                           int64_t shards, std::vector<std::vector<Gradient>> parts,
                                           const std::vector<int64_t>& rows,
                                           const std::vector<std::vector<double>>& scalar_sums,
                                           const std::vector<nn::Variable*>& variables,
                                           std::vector<double>* means) {
  if (group_.size() != 1) {
    throw InvalidArgumentError(str_cat("a reduction in shard order needs one replica per worker; ",
                                       "this worker has ", group_.size()));
  }
  NoGradScope no_grad;
  int levels = 0;
  while ((int64_t{1} << levels) < shards) ++levels;
  std::map<int64_t, Sums> leaves;
  io::Element counts;  // this worker's rows and scalar sums, per shard
  std::vector<double> flat_scalars;
  for (size_t p = 0; p < parts.size(); ++p) {
    Sums& leaf = leaves[first_shard + static_cast<int64_t>(p)];
    for (const Gradient& g : parts[p]) {
      // Sparse rows are added densely: their order within a shard's sum is the tape's.
      leaf.push_back(g.defined() ? to_device(g.dense(), Device::cpu(0)) : Tensor());
    }
    flat_scalars.insert(flat_scalars.end(), scalar_sums[p].begin(), scalar_sums[p].end());
  }
  counts.features.set("rows", Tensor::from_vector(rows));
  counts.features.set("scalars", Tensor::from_vector(flat_scalars));
  std::string mine;
  io::encode_element(counts, mine);
  // The last worker's shards reach the end of the tree, past the last shard.
  int64_t last = first_shard + static_cast<int64_t>(parts.size());
  std::vector<Node> nodes;
  cover({levels, 0}, first_shard, last == shards ? int64_t{1} << levels : last, &nodes);
  for (const Node& node : nodes) {
    io::Element sum;
    sum.features.set("level", Tensor::scalar(int64_t{node.first}));
    sum.features.set("index", Tensor::scalar(node.second));
    Sums value = subtree(node, leaves);
    for (size_t i = 0; i < value.size(); ++i) {
      if (value[i].defined()) sum.features.set(gradient_key(i), value[i]);
    }
    io::encode_element(sum, mine);
  }
  std::map<Node, Sums> sent;
  int64_t total_rows = 0;
  std::vector<double> scalars;
  for (const std::string& bytes : extended_.all_gather_bytes(std::move(mine))) {
    size_t offset = 0;
    io::Element worker = io::decode_element(bytes, offset, "a worker's shard gradients");
    std::vector<int64_t> worker_rows = worker.features.at("rows").to_vector<int64_t>();
    std::vector<double> worker_scalars = worker.features.at("scalars").to_vector<double>();
    size_t per_shard = worker_rows.empty() ? 0 : worker_scalars.size() / worker_rows.size();
    if (scalars.empty()) scalars.assign(per_shard, 0.0);
    for (size_t p = 0; p < worker_rows.size(); ++p) {
      total_rows += worker_rows[p];
      for (size_t s = 0; s < per_shard && s < scalars.size(); ++s) {
        scalars[s] += worker_scalars[p * per_shard + s];
      }
    }
    while (offset < bytes.size()) {
      io::Element sum = io::decode_element(bytes, offset, "a worker's shard gradients");
      Sums value(variables.size());
      for (size_t i = 0; i < value.size(); ++i) {
        if (const Tensor* g = sum.features.find(gradient_key(i))) value[i] = *g;
      }
      sent[{static_cast<int>(sum.features.at("level").item<int64_t>()),
            sum.features.at("index").item<int64_t>()}] = std::move(value);
    }
  }
  if (means) {
    for (size_t s = 0; s < means->size() && s < scalars.size(); ++s) {
      (*means)[s] = scalars[s] / static_cast<double>(total_rows);
    }
  }
  Sums root = combined({levels, 0}, sent);
  std::vector<Gradient> mean(variables.size());
  for (size_t i = 0; i < root.size() && i < mean.size(); ++i) {
    if (root[i].defined()) {
      mean[i] = to_device(root[i] * (1.0 / static_cast<double>(total_rows)), device());
    }
  }
  apply_reduced(optimizer, std::move(mean), variables);
}

}  // namespace cadre
