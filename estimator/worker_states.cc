#include "estimator/worker_states.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "io/element_codec.h"
#include "io/virtual_shards.h"

namespace cadre::estimator_internal {
namespace {

constexpr char kInput[] = "input/";
constexpr char kGenerator[] = "rng/";
constexpr char kPipelinePrefix[] = "input_pipeline_";
constexpr char kPipelinesAttribute[] = "input_pipelines";
constexpr char kBehind[] = "batches_behind";

std::string pipeline_prefix(int worker) { return str_cat(kPipelinePrefix, worker, "/"); }

// A worker cannot be more batches behind than the job took steps: a count beyond would make
// a repeated input skip for ever.
void check_behind(const checkpoint::CheckpointReader& reader, const std::string& key,
                  int64_t batches) {
  if (batches < 0 || batches > reader.global_step()) {
    throw DataLossError(str_cat(reader.path(), ": input position entry '", key, "' is ", batches,
                                " batches behind; expected 0 to the global step, ",
                                reader.global_step()));
  }
}

}  // namespace

std::string encode_worker_state(const WorkerState& state) {
  io::Element element;
  for (const auto& [key, value] : state.input) element.features.set(kInput + key, value);
  for (const auto& [name, generator] : state.generators) {
    element.features.set(kGenerator + name,
                         Tensor::from_vector<int64_t>({static_cast<int64_t>(generator.seed),
                                                       static_cast<int64_t>(generator.stream),
                                                       static_cast<int64_t>(generator.offset)}));
  }
  std::string bytes;
  io::encode_element(element, bytes);
  return bytes;
}

WorkerState decode_worker_state(std::string_view bytes, const std::string& what) {
  size_t offset = 0;
  io::Element element = io::decode_element(bytes, offset, what);
  WorkerState state;
  for (const auto& [key, value] : element.features) {
    if (key.starts_with(kInput)) {
      state.input[key.substr(std::string_view(kInput).size())] = value;
    } else if (key.starts_with(kGenerator) && value.dtype() == DType::kInt64 &&
               value.numel() == 3) {
      std::vector<int64_t> fields = value.to_vector<int64_t>();
      state.generators[key.substr(std::string_view(kGenerator).size())] = {
          static_cast<uint64_t>(fields[0]), static_cast<uint64_t>(fields[1]),
          static_cast<uint64_t>(fields[2])};
    } else {
      throw DataLossError(str_cat(what, ": unexpected entry '", key, "' in a worker's state"));
    }
  }
  return state;
}

void add_worker_state(int worker, WorkerState state, checkpoint::CheckpointData* data,
                      int64_t batches_behind) {
  if (batches_behind > 0) {
    if (io::saved_virtual_shards(state.input) > 0) {
      io::set_shards_behind(state.input, batches_behind);  // whoever owns each shard next
    } else {
      io::StateReader saved(state.input);
      const int64_t already = saved.contains(kBehind) ? saved.read_int(kBehind) : 0;
      state.input[kBehind] = Tensor::scalar<int64_t>(already + batches_behind);
    }
  }
  if (worker == 0) {
    io::StateWriter(data->iterator_state).adopt(std::move(state.input));  // moved, not copied
  } else {
    std::string prefix = pipeline_prefix(worker);
    for (auto& [key, value] : state.input) data->iterator_state[prefix + key] = std::move(value);
  }
  for (const auto& [name, generator] : state.generators) data->rng_states[name] = generator;
}

void set_input_pipelines(int pipelines, checkpoint::CheckpointData* data) {
  data->attributes[kPipelinesAttribute] = std::to_string(pipelines);
}

std::optional<io::IteratorState> saved_worker_input(const checkpoint::CheckpointReader& reader,
                                                    int worker, int workers) {
  std::map<std::string, std::string> attributes = reader.attributes();
  auto it = attributes.find(kPipelinesAttribute);
  if (worker == 0 || it == attributes.end() || std::atoi(it->second.c_str()) != workers) {
    return std::nullopt;
  }
  io::IteratorState mine;
  const std::string prefix = pipeline_prefix(worker);
  for (auto& [key, value] : reader.iterator_state(/*verify=*/false)) {
    if (key.starts_with(prefix)) mine.emplace(key.substr(prefix.size()), value);
  }
  if (mine.empty()) return std::nullopt;
  return mine;
}

int64_t virtual_shards_in(const std::map<std::string, Tensor>& saved) {
  if (int64_t shards = io::saved_virtual_shards(saved)) return shards;
  std::map<std::string, io::IteratorState> by_pipeline;
  for (const auto& [key, value] : saved) {
    const size_t slash = key.find('/');
    if (key.starts_with(kPipelinePrefix) && slash != std::string::npos) {
      by_pipeline[key.substr(0, slash)].emplace(key.substr(slash + 1), value);
    }
  }
  for (const auto& [pipeline, state] : by_pipeline) {
    if (int64_t shards = io::saved_virtual_shards(state)) return shards;
  }
  return 0;
}

std::optional<SavedInput> input_state_of(const checkpoint::CheckpointReader& reader, int pipeline,
                                         int pipelines, std::string* why) {
  std::map<std::string, Tensor> all = reader.iterator_state(/*verify=*/false);
  if (virtual_shards_in(all) > 0) {
    // Each worker saved the shards it read, under names of their own: together they are the
    // input's position, which any number of workers divide again.
    io::IteratorState shards;
    for (auto& [key, value] : all) {
      std::string_view name = key;
      if (name.starts_with(kPipelinePrefix)) name.remove_prefix(name.find('/') + 1);
      if (name.starts_with(str_cat(io::kShardsBehind, "/"))) {
        check_behind(reader, key, io::StateReader(all).read_int(key));
      }
      shards.emplace(std::string(name), value);
    }
    return SavedInput{std::move(shards)};
  }
  int saved = 1;
  std::map<std::string, std::string> attributes = reader.attributes();
  if (auto it = attributes.find(kPipelinesAttribute); it != attributes.end()) {
    saved = std::atoi(it->second.c_str());
  }
  if (saved != pipelines) {
    *why = str_cat("the checkpoint holds the input positions of ", saved,
                   " worker(s) and this job shards its input over ", pipelines,
                   ": every worker reads its new shard from the start (RunConfig.input_shards, "
                   "set when a job starts, keeps positions across a change of workers)");
    return std::nullopt;
  }
  io::IteratorState mine;
  std::string prefix = pipeline_prefix(pipeline);
  for (const auto& [key, value] : all) {
    if (pipeline == 0 ? !key.starts_with(kPipelinePrefix) : key.starts_with(prefix)) {
      mine[pipeline == 0 ? key : key.substr(prefix.size())] = value;
    }
  }
  if (mine.empty()) {
    *why = str_cat("the checkpoint holds no input position for worker ", pipeline,
                   " (its workers step on their own): it reads its shard from the start");
    return std::nullopt;
  }
  SavedInput out;
  if (mine.count(kBehind)) {
    out.batches_behind = io::StateReader(mine).read_int(kBehind);
    check_behind(reader, prefix + kBehind, out.batches_behind);
    mine.erase(kBehind);
  }
  out.state = std::move(mine);
  return out;
}

}  // namespace cadre::estimator_internal
