// Shard::snapshot, the copy a ps task writes as its part of a sharded checkpoint.
#include "cadre/autodiff/tape.h"
#include "strategies/ps/shard.h"

namespace cadre::ps {
namespace {

std::string snapshot_key(const std::string& name, int64_t first_row) {
  return name + "@" + std::to_string(first_row);
}

// `value` copied into `reuse` when it has the same type, else into new memory. Reusing matters:
// on a virtual machine the first copy of a 1 GiB share into fresh memory took 5-6 s, into the
// last snapshot's memory 0.2-0.4 s, and training waits for that copy.
Tensor copy_of(const Tensor& value, Tensor reuse) {
  if (!reuse.defined() || reuse.shape() != value.shape() || reuse.dtype() != value.dtype()) {
    reuse = Tensor::empty(value.shape(), value.dtype(), Device::cpu(0));
  }
  reuse.assign(value);
  return reuse;
}

}  // namespace

void Shard::snapshot(PartSnapshot& snapshot) {
  NoGradScope no_grad;
  std::map<std::string, Tensor> reuse;
  for (SnapshotItem& item : snapshot.items) {
    reuse[snapshot_key(item.name, item.first_row)] = std::move(item.value);
  }
  snapshot.items.clear();
  snapshot.iterations.clear();
  std::vector<Entry*> entries;
  std::map<std::string, std::vector<nn::Variable*>> slots_by_owner;
  {
    MutexLock lock(mutex_);
    for (const auto& [name, entry] : entries_) {
      if (entry->variable) entries.push_back(entry.get());
    }
    for (nn::Variable* slot : slots_.variables()) {
      slots_by_owner[slot->spec().slot_of].push_back(slot);
    }
    for (const auto& [name, state] : optimizers_.by_name()) {
      snapshot.iterations[name + "/iterations"] = state.iterations;
    }
  }
  auto add = [&](const std::string& name, const std::string& slot_of, int64_t first_row,
                 const Tensor& value) {
    Tensor memory;
    if (auto it = reuse.find(snapshot_key(name, first_row)); it != reuse.end()) memory = it->second;
    snapshot.items.push_back({name, slot_of, first_row, copy_of(value, memory)});
  };
  // A variable and its slots under the variable's lock: its updates wait for this copy only.
  for (Entry* entry : entries) {
    const std::string& own = entry->def.name();
    std::string logical = entry->def.logical_name().empty() ? own : entry->def.logical_name();
    int64_t first_row = entry->shape.rank() == 0 ? 0 : entry->def.first_row();
    std::lock_guard<std::mutex> hold(entry->mutex);
    add(logical, "", first_row, entry->variable->tensor());
    for (nn::Variable* slot : slots_by_owner[own]) {
      add(logical + slot->name().substr(own.size()), logical, first_row, slot->tensor());
    }
  }
}

}  // namespace cadre::ps
