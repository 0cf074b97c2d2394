#include "checkpoint/host_snapshot.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace cadre::checkpoint {
namespace {

template <typename Map>
const typename Map::mapped_type* find_in(const Map* map, const typename Map::key_type& key) {
  if (map == nullptr) return nullptr;
  auto it = map->find(key);
  return it == map->end() ? nullptr : &it->second;
}

}  // namespace

std::shared_ptr<nn::DeferredCopy> host_copy_of(CheckpointData& data, const CheckpointData* old) {
  struct Origin {
    const std::string* name;
    int part;  // -1: a whole variable; -2: an iterator tensor
  };
  std::vector<Tensor*> tensors;
  std::vector<Origin> origins;
  for (auto& [name, value] : data.variables) {
    tensors.push_back(&value);
    origins.push_back({&name, -1});
  }
  for (auto& [name, parts] : data.partitioned_variables) {
    for (size_t i = 0; i < parts.size(); ++i) {
      tensors.push_back(&parts[i]);
      origins.push_back({&name, static_cast<int>(i)});
    }
  }
  for (auto& [name, value] : data.iterator_state) {
    tensors.push_back(&value);
    origins.push_back({&name, -2});
  }
  if (old == nullptr) return std::make_shared<nn::DeferredCopy>(std::move(tensors));
  auto memory_for = [old, origins = std::move(origins)](size_t i) -> Tensor {
    const Origin& o = origins[i];
    const Tensor* found = nullptr;
    if (o.part == -1) {
      found = find_in(&old->variables, *o.name);
    } else if (o.part == -2) {
      found = find_in(&old->iterator_state, *o.name);
    } else if (const auto* parts = find_in(&old->partitioned_variables, *o.name)) {
      if (static_cast<size_t>(o.part) < parts->size()) found = &(*parts)[o.part];
    }
    return found ? *found : Tensor();
  };
  return std::make_shared<nn::DeferredCopy>(std::move(tensors), std::move(memory_for));
}

CheckpointData copy_to_host(const CheckpointData& data, const CheckpointData* reuse) {
  CheckpointData copy = data;
  std::shared_ptr<nn::DeferredCopy> copies = host_copy_of(copy, reuse);
  copies->run();
  if (copies->error()) std::rethrow_exception(copies->error());
  return copy;
}

}  // namespace cadre::checkpoint
