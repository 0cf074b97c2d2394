// PsVariables' side of sharded checkpoints: each ps task writes its own part (ps.proto's
// Save), and the chief keeps only its local variables and the optimizers' step counters.
#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/runtime/in_parallel.h"
#include "strategies/ps/ps_variables.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {

int PsVariables::checkpoint_parts() const {
  int64_t threshold = options_.sharded_checkpoint_min_bytes;
  if (threshold < 0) return 0;
  int64_t bytes = 0;
  MutexLock lock(mutex_);
  for (const auto& [name, r] : remote_) {
    bytes += r.variable->spec().shape.num_elements() *
             static_cast<int64_t>(dtype_size(r.variable->spec().dtype));
  }
  return bytes >= threshold ? static_cast<int>(clients_.size()) : 0;
}

std::shared_ptr<nn::VariableStore> PsVariables::save_parts(
    const std::string& directory, const std::vector<std::string>& part_names, int64_t step,
    std::vector<SavedPart>* parts) {
  CHECK_EQ(part_names.size(), clients_.size());
  std::vector<SaveResponse> responses(clients_.size());
  in_parallel(static_cast<int>(clients_.size()), [&](int p) {
    SaveRequest request;
    request.set_directory(directory);
    request.set_file_name(part_names[static_cast<size_t>(p)]);
    request.set_global_step(step);
    responses[static_cast<size_t>(p)] = clients_[static_cast<size_t>(p)]->save(request);
  });
  std::map<std::string, Shape> shapes;
  {
    MutexLock lock(mutex_);
    for (const auto& [name, r] : remote_) shapes[name] = r.variable->spec().shape;
  }
  std::map<std::string, int64_t> iterations;
  std::set<std::string> saved;
  for (size_t p = 0; p < clients_.size(); ++p) {
    SavedPart part;
    part.file_name = part_names[p];
    for (const SavedSlice& s : responses[p].slices()) {
      const std::string& variable = s.slot_of().empty() ? s.name() : s.slot_of();
      auto shape = shapes.find(variable);
      if (shape == shapes.end()) {
        throw InternalError(str_cat(clients_[p]->name(), " saved '", s.name(),
                                    "', a variable this chief did not create there"));
      }
      saved.insert(s.name());
      part.slices.push_back({s.name(), s.slot_of(), checked_dtype(s.dtype(), s.name()),
                             shape->second, s.first_row(), s.rows()});
    }
    for (const auto& [counter, value] : responses[p].iterations()) {
      iterations[counter] = std::max(iterations[counter], value);
    }
    PsClient* client = clients_[p].get();
    double timeout = options_.init_timeout_seconds;
    part.wait = [client, file = part.file_name, timeout] {
      SaveStatusRequest request;
      request.set_file_name(file);
      request.set_timeout_seconds(timeout);
      SaveStatusResponse written = client->save_status(request);
      return std::make_pair(static_cast<uint64_t>(written.bytes()), written.crc32c());
    };
    parts->push_back(std::move(part));
  }
  // What the chief saves itself: the step counters (each optimizer's the most advanced any
  // ps task holds) and its own variables (integer counters).
  auto store = std::make_shared<nn::VariableStore>();
  for (const auto& [counter, value] : iterations) {
    if (saved.count(counter)) continue;
    nn::VariableSpec spec;
    spec.name = counter;
    spec.shape = Shape{};
    spec.dtype = DType::kInt64;
    spec.trainable = false;
    store->add(std::make_shared<nn::Variable>(spec, Tensor::scalar<int64_t>(value)));
  }
  for (nn::Variable* v : primary().variables()) {
    if (saved.count(v->name()) || store->find(v->name())) continue;
    store->add(std::shared_ptr<nn::Variable>(std::shared_ptr<void>(), v));
  }
  return store;
}

}  // namespace cadre::ps
