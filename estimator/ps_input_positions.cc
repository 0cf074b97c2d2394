#include "estimator/ps_input_positions.h"

#include <glog/logging.h>

#include <chrono>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "io/virtual_shards.h"
#include "strategies/ps/parameter_servers.h"
#include "strategies/ps/ps_client.h"
#include "strategies/strategy_extended.h"

namespace cadre::estimator_internal {
namespace {

ps::InputPositionsResponse positions_on_ps(const Strategy& strategy, int pipeline, int64_t at_step,
                                           bool ended = false) {
  ps::InputPositionsRequest request;
  request.set_pipeline(pipeline);
  request.set_at_step(at_step);
  request.set_ended(ended);
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
  if (virtual_shards_in(saved) > 0) {
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

ps::InputReport* input_report_to_ps(const Strategy& strategy) {
  const ps::ParameterServers* servers = strategy.extended().parameter_servers();
  if (!servers || servers->clients().empty() || strategy.worker_index() < 0) return nullptr;
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
    // The chief's own is exact; a worker whose input ended before it pushed has none.
    if (worker == strategy.worker_index() || position.state().empty()) continue;
    WorkerState state =
        decode_worker_state(position.state(), str_cat("the input position of worker ", worker));
    add_worker_state(worker, std::move(state), data, position.behind());
    listed.insert(worker);
  }
  if (resumed) carry_positions(*resumed, strategy, listed, data);
}

std::optional<SavedInput> position_on_ps(const Strategy& strategy) {
  ps::InputPositionsResponse kept = positions_on_ps(strategy, strategy.worker_index() + 1, 0);
  if (kept.positions().empty() || kept.positions(0).state().empty()) return std::nullopt;
  const ps::InputPosition& position = kept.positions(0);
  WorkerState state = decode_worker_state(
      position.state(), str_cat("the input position of worker ", strategy.worker_index()));
  return SavedInput{std::move(state.input), position.behind()};
}

int64_t client_generation_on_ps(const Strategy& strategy) {
  return strategy.extended()
      .parameter_servers()
      ->clients()[0]
      ->units(ps::UnitsRequest())
      .generation();
}

int64_t end_input_on_ps(const Strategy& strategy, bool chief, std::optional<int64_t> max_steps,
                        const std::function<bool()>& stop, double stalled_secs) {
  using Clock = std::chrono::steady_clock;
  const int own = strategy.worker_index() + 1;
  ps::InputPositionsResponse now = positions_on_ps(strategy, own, 0, /*ended=*/true);
  if (!chief) return now.global_step();
  std::map<int, std::pair<int64_t, Clock::time_point>> pushes;  // of the others, last change
  Clock::time_point logged = Clock::now();
  while (true) {
    now = positions_on_ps(strategy, 0, 0);
    if ((max_steps && now.global_step() >= *max_steps) || stop()) return now.global_step();
    std::map<int, const ps::InputPosition*> by_pipeline;
    for (const ps::InputPosition& p : now.positions()) by_pipeline[p.pipeline()] = &p;
    std::vector<int> reading;
    for (int pipeline = 1; pipeline <= strategy.num_workers(); ++pipeline) {
      auto it = by_pipeline.find(pipeline);
      if (it != by_pipeline.end() && it->second->ended()) continue;
      const int64_t count = it == by_pipeline.end() ? 0 : it->second->pushes();
      const Clock::time_point now_time = Clock::now();
      auto& [last_count, changed] = pushes.try_emplace(pipeline, count, now_time).first->second;
      if (last_count != count) {
        last_count = count;
        changed = now_time;
      }
      if (std::chrono::duration<double>(now_time - changed).count() < stalled_secs) {
        reading.push_back(pipeline - 1);
      }
    }
    if (reading.empty()) return now.global_step();
    if (Clock::now() - logged > std::chrono::seconds(10)) {
      LOG(INFO) << "the chief's input has ended; waiting for worker(s) " << join(reading, ", ")
                << " to finish theirs (global step " << now.global_step() << ")";
      logged = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace cadre::estimator_internal
