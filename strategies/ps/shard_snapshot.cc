// Shard::snapshot, the copy a ps task writes as its part of a sharded checkpoint.
#include <sys/mman.h>

#include "cadre/autodiff/tape.h"
#include "strategies/ps/shard.h"

namespace cadre::ps {
namespace {

std::string snapshot_key(const std::string& name, int64_t first_row) {
  return name + "@" + std::to_string(first_row);
}

// Host memory for a snapshot tensor. Large ones are mapped with transparent huge pages where
// the kernel offers them on request: the first copy into fresh memory is page faults more than
// copying (a 1 GiB snapshot took 3.6-5.8 s in 4 KiB pages on a virtual machine, 0.3-0.5 s
// into memory already mapped), and training waits for that copy.
Tensor snapshot_memory(const Shape& shape, DType dtype) {
  size_t bytes = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes < kHugePage) return Tensor::empty(shape, dtype, Device::cpu(0));
  size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* memory =
      ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return Tensor::empty(shape, dtype, Device::cpu(0));
  ::madvise(memory, mapped, MADV_HUGEPAGE);  // a hint: without it, plain pages
  return Tensor::from_blob(memory, shape, dtype, Device::cpu(0),
                           [memory, mapped] { ::munmap(memory, mapped); });
}

// `value` copied into `reuse` when it has the same type (its pages are mapped already), else
// into new memory.
Tensor copy_of(const Tensor& value, Tensor reuse) {
  if (!reuse.defined() || reuse.shape() != value.shape() || reuse.dtype() != value.dtype()) {
    reuse = snapshot_memory(value.shape(), value.dtype());
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
