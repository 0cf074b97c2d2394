// Shard::snapshot, what a ps task writes as its part of a sharded checkpoint: copy-on-write,
// so that marking it costs training nothing and the task never holds a second copy of its
// share (a full copy of a 1 GiB share took 5-6 s into fresh memory on a virtual machine,
// 0.2-0.4 s into reused memory, and doubled the task's memory).
#include <glog/logging.h>

#include <mutex>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/nn/optimizer_config.h"
#include "strategies/ps/shard.h"

namespace cadre::ps {
namespace {

// Tensors up to this size are copied at the mark: that costs microseconds, and spares a
// dense update of a small variable (a classifier's kernels) keeping them aside.
constexpr size_t kCopiedBytes = size_t{256} << 10;

// Whether the optimizer's sparse update writes only the rows its gradient names, in the
// variable and in every slot. The others (Adam, RMSProp, SGD with momentum) update every
// slot row each step, as TensorFlow 2 does: their sparse updates count as dense.
bool sparse_updates_are_row_local(const nn::Optimizer& optimizer) {
  nn::OptimizerConfig config = optimizer.config();
  if (config.kind == "adagrad" || config.kind == "ftrl") return true;
  if (config.kind == "sgd") {
    auto momentum = config.numbers.find("momentum");
    return momentum == config.numbers.end() || momentum->second == 0;
  }
  return false;
}

}  // namespace

void Shard::snapshot(PartSnapshot& snapshot) {
  NoGradScope no_grad;
  snapshot.items.clear();
  snapshot.iterations.clear();
  std::vector<Entry*> entries;
  std::map<std::string, std::vector<nn::Variable*>> slots_by_owner;
  {
    MutexLock lock(mutex_);
    if (!snapshot_entries_.empty()) {
      throw InternalError(str_cat(task_, ": a snapshot marked before the last one ended"));
    }
    for (const auto& [name, entry] : entries_) {
      if (entry->variable) entries.push_back(entry.get());
    }
    for (nn::Variable* slot : slots_.variables()) {
      slots_by_owner[slot->spec().slot_of].push_back(slot);
    }
    for (const auto& [name, state] : optimizers_.by_name()) {
      snapshot.iterations[name + "/iterations"] = state.iterations;
    }
    snapshot_entries_ = entries;
  }
  for (Entry* entry : entries) {
    const std::string& own = entry->def.name();
    std::string logical = entry->def.logical_name().empty() ? own : entry->def.logical_name();
    int64_t first_row = entry->shape.rank() == 0 ? 0 : entry->def.first_row();
    // The variable and its slots at one moment: no update of them runs meanwhile.
    std::lock_guard<std::mutex> hold(entry->mutex);
    entry->saving.clear();
    auto add = [&](const std::string& name, const std::string& slot_of, const Tensor& value) {
      SnapshotItem item{name, slot_of, first_row, value.dtype(), value.shape(), {}, {}};
      if (value.rank() == 0 || value.nbytes() <= kCopiedBytes || !value.is_contiguous() ||
          !value.device().is_cpu()) {
        item.value = value.contiguous().clone();
      } else {
        size_t index = entry->saving.size();
        entry->saving.push_back(std::make_unique<SavedTensor>(value));
        item.read = [entry, index](int64_t begin, int64_t end, void* destination) {
          std::lock_guard<std::mutex> hold(entry->mutex);
          if (index >= entry->saving.size()) {
            throw InternalError("a checkpoint part read after its snapshot ended");
          }
          entry->saving[index]->read(begin, end, destination);
        };
      }
      snapshot.items.push_back(std::move(item));
    };
    add(logical, "", entry->variable->tensor());
    for (nn::Variable* slot : slots_by_owner[own]) {
      add(logical + slot->name().substr(own.size()), logical, slot->tensor());
    }
  }
}

void Shard::end_snapshot() {
  std::vector<Entry*> entries;
  {
    MutexLock lock(mutex_);
    entries.swap(snapshot_entries_);
  }
  // Each tensor's peak, summed: an upper bound on what the snapshot cost in memory.
  size_t kept = 0;
  for (Entry* entry : entries) {
    std::lock_guard<std::mutex> hold(entry->mutex);
    for (const auto& saved : entry->saving) kept += saved->peak_kept_bytes();
    entry->saving.clear();
  }
  if (!entries.empty()) {
    LOG(INFO) << task_ << ": the snapshot kept aside at most " << kept
              << " bytes of rows updated before the part had them";
  }
}

void Shard::keep_for_snapshot(const nn::Optimizer& optimizer, const std::vector<Entry*>& entries,
                              const std::vector<Gradient>& gradients) {
  bool any = false;
  for (Entry* entry : entries) any = any || !entry->saving.empty();
  if (!any) return;
  const bool row_local = sparse_updates_are_row_local(optimizer);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!gradients[i].defined()) continue;  // the optimizer skips it
    for (auto& saved : entries[i]->saving) {
      if (gradients[i].is_sparse() && row_local) {
        saved->keep_rows(gradients[i].sparse().indices.contiguous());
      } else {
        saved->keep_all();
      }
    }
  }
}

}  // namespace cadre::ps
