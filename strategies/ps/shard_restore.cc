// A restore on the ps task: the chief names the checkpoint and the rows (RestoreRows), and the
// task reads its own share of them, so that no process reads the whole model through its
// memory and every task reads at once (before, the chief built a 6 GiB model's table whole
// and sliced it out: 52 s, and the table in its memory).
#include <glog/logging.h>

#include <chrono>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {

Tensor Shard::read_restored(const RestoreRows& rows, DType dtype, const Shape& shape,
                            const std::string& what) const {
  if (!read_rows_) {
    throw FailedPreconditionError(str_cat(what, ": ", task_,
                                          " cannot read checkpoints (started without a "
                                          "model_dir); the chief must send the values"));
  }
  if (shape.rank() == 0) {
    throw InvalidArgumentError(str_cat(what, ": restoring rows of a 0-d variable"));
  }
  auto start = std::chrono::steady_clock::now();
  Tensor value = Tensor::empty(shape, dtype, Device::cpu(0));
  read_rows_(rows.checkpoint(), rows.name(), rows.first_row(), value);
  LOG(INFO) << what << ": read rows [" << rows.first_row() << ", " << rows.first_row() + shape[0]
            << ") of '" << rows.name() << "' from " << rows.checkpoint() << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s";
  return value;
}

std::map<std::string, Tensor> Shard::read_restored_slots(const PushRequest& request) const {
  std::map<std::string, Tensor> restored;
  for (const NamedTensor& slot : request.slots()) {
    if (!slot.has_restore()) continue;
    std::string what = str_cat(task_, ": slot '", slot.name(), "'");
    restored[slot.name()] = read_restored(slot.restore(), checked_dtype(slot.value().dtype(), what),
                                          checked_shape(slot.value().shape(), what), what);
  }
  return restored;
}

}  // namespace cadre::ps
