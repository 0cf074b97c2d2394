// ReplicaContext::apply_shard_gradients: the reduction of deterministic steps. An all-reduce
// adds the workers' sums in an order that follows the number of workers (and floating-point
// addition does not commute bit for bit); gathering every input shard's sum and adding them
// in shard order gives the same bits for any number of workers.
#include <map>
#include <string>

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

std::string gradient_key(size_t i) { return str_cat("g", i); }

}  // namespace

void ReplicaContext::apply_shard_gradients(nn::Optimizer& optimizer, int64_t first_shard,
                                           std::vector<std::vector<Gradient>> parts,
                                           const std::vector<int64_t>& rows,
                                           const std::vector<std::vector<double>>& scalar_sums,
                                           const std::vector<nn::Variable*>& variables,
                                           std::vector<double>* means) {
  if (group_.size() != 1) {
    throw InvalidArgumentError(str_cat("a reduction in shard order needs one replica per worker; ",
                                       "this worker has ", group_.size()));
  }
  NoGradScope no_grad;
  std::string mine;
  for (size_t p = 0; p < parts.size(); ++p) {
    io::Element part;
    part.features.set("shard", Tensor::scalar(first_shard + static_cast<int64_t>(p)));
    part.features.set("rows", Tensor::scalar(rows[p]));
    part.features.set("scalars", Tensor::from_vector(scalar_sums[p]));
    for (size_t i = 0; i < parts[p].size(); ++i) {
      // Sparse rows are added densely: their order within a shard's sum is the tape's.
      if (parts[p][i].defined()) {
        part.features.set(gradient_key(i), to_device(parts[p][i].dense(), Device::cpu(0)));
      }
    }
    io::encode_element(part, mine);
  }
  std::map<int64_t, io::Element> shards;
  for (const std::string& bytes : extended_.all_gather_bytes(std::move(mine))) {
    for (size_t offset = 0; offset < bytes.size();) {
      io::Element part = io::decode_element(bytes, offset, "a worker's shard gradients");
      shards.emplace(part.features.at("shard").item<int64_t>(), std::move(part));
    }
  }
  std::vector<Tensor> sums(variables.size());
  std::vector<double> scalars;
  int64_t total_rows = 0;
  for (const auto& [shard, part] : shards) {
    total_rows += part.features.at("rows").item<int64_t>();
    std::vector<double> values = part.features.at("scalars").to_vector<double>();
    if (scalars.empty()) scalars.assign(values.size(), 0.0);
    for (size_t s = 0; s < values.size(); ++s) scalars[s] += values[s];
    for (size_t i = 0; i < sums.size(); ++i) {
      const Tensor* g = part.features.find(gradient_key(i));
      if (g) sums[i] = sums[i].defined() ? sums[i] + *g : *g;
    }
  }
  if (means) {
    for (size_t s = 0; s < means->size() && s < scalars.size(); ++s) {
      (*means)[s] = scalars[s] / static_cast<double>(total_rows);
    }
  }
  std::vector<Gradient> mean(sums.size());
  for (size_t i = 0; i < sums.size(); ++i) {
    if (sums[i].defined()) {
      mean[i] = to_device(sums[i] * (1.0 / static_cast<double>(total_rows)), device());
    }
  }
  apply_reduced(optimizer, std::move(mean), variables);
}

}  // namespace cadre
