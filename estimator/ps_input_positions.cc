#include "estimator/ps_input_positions.h"

#include <map>
#include <set>
#include <string_view>

#include "core/base/strings.h"
#include "io/virtual_shards.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/ps_client.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

ps::InputPositionsResponse positions_on_ps(const Strategy& strategy, int pipeline,
                                           int64_t at_step) {
  ps::InputPositionsRequest request;
  request.set_pipeline(pipeline);
  request.set_at_step(at_step);
  return strategy.extended().parameter_servers()->clients()[0]->input_positions(request);
}

// The name of the input shard an iterator-state key is under ("shard_5" for
// "input_pipeline_2/shard_5/..." or "behind/shard_5"), or empty.
std::string_view shard_of(std::string_view key) {
  if (key.starts_with("input_pipeline_")) key.remove_prefix(key.find('/') + 1);
  if (key.starts_with(str_cat(io::kShardsBehind, "/"))) {
    key.remove_prefix(std::string_view(io::kShardsBehind).size() + 1);
  }
  if (!key.starts_with("shard_")) return {};
  return key.substr(0, key.find('/'));
}

// The positions in `resumed` of the workers (or input shards) `data` has none of.
void carry_positions(const checkpoint::CheckpointReader& resumed, const Strategy& strategy,
                     const std::set<int>& listed, checkpoint::CheckpointData* data) {
  std::map<std::string, Tensor> saved = resumed.iterator_state(/*verify=*/false);
  if (io::saved_virtual_shards(saved) > 0) {
    std::set<std::string_view> covered;
    for (const auto& [key, value] : data->iterator_state) covered.insert(shard_of(key));
    for (auto& [key, value] : saved) {
      std::string_view shard = shard_of(key);
      if (!shard.empty() && !covered.count(shard)) data->iterator_state.emplace(key, value);
    }
    return;
  }
  for (int worker = 0; worker < strategy.num_workers(); ++worker) {
    if (worker == strategy.worker_index() || listed.count(worker)) continue;
    if (std::optional<io::IteratorState> input =
            saved_worker_input(resumed, worker, strategy.num_workers())) {
      add_worker_state(worker, WorkerState{std::move(*input), {}}, data);
    }
  }
}

}  // namespace

ps::InputReport* input_report_to_ps(const RunConfig& config, const Strategy& strategy) {
  const ps::ParameterServers* servers = strategy.extended().parameter_servers();
  if (!servers || servers->clients().empty() ||
      (config.cluster && config.cluster->has_job("client"))) {
    return nullptr;
  }
  ps::InputReport& report = servers->input_report();
  report.set_pipeline(strategy.worker_index() + 1);
  return &report;
}

void add_positions_on_ps(const Strategy& strategy, int64_t step,
                         const checkpoint::CheckpointReader* resumed,
                         checkpoint::CheckpointData* data) {
  const ps::InputPositionsResponse kept = positions_on_ps(strategy, 0, step);
  std::set<int> listed;
  for (const ps::InputPosition& position : kept.positions()) {
    const int worker = position.pipeline() - 1;
    if (worker == strategy.worker_index()) continue;  // the chief's own is exact
    WorkerState state =
        decode_worker_state(position.state(), str_cat("the input position of worker ", worker));
    add_worker_state(worker, std::move(state), data, position.behind());
    listed.insert(worker);
  }
  if (resumed) carry_positions(*resumed, strategy, listed, data);
}

std::optional<SavedInput> position_on_ps(const Strategy& strategy) {
  ps::InputPositionsResponse kept = positions_on_ps(strategy, strategy.worker_index() + 1, 0);
  if (kept.positions().empty()) return std::nullopt;
  const ps::InputPosition& position = kept.positions(0);
  WorkerState state = decode_worker_state(
      position.state(), str_cat("the input position of worker ", strategy.worker_index()));
  return SavedInput{std::move(state.input), position.behind()};
}

}  // namespace cadre::estimator_internal
