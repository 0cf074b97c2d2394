// A restore on the ps task: the chief names the checkpoint and the rows (RestoreRows), and the
// task reads its own share of them, so that no process reads the whole model through its
// memory and every task reads at once (before, the chief built a 6 GiB model's table whole
// and sliced it out: 52 s, and the table in its memory). The slots a chief's push has the task
// make itself are read here too, or filled from their initializer (fill_proto.h).
#include <glog/logging.h>

#include <chrono>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/fill_proto.h"
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

std::map<std::string, Tensor> Shard::own_slots(const PushRequest& request) const {
  std::map<std::string, Tensor> made;
  for (const NamedTensor& slot : request.slots()) {
    if (!slot.has_restore() && !slot.has_fill()) continue;
    std::string what = str_cat(task_, ": slot '", slot.name(), "'");
    DType dtype = checked_dtype(slot.value().dtype(), what);
    Shape shape = checked_shape(slot.value().shape(), what);
    made[slot.name()] = slot.has_restore() ? read_restored(slot.restore(), dtype, shape, what)
                                           : filled(slot.fill(), dtype, shape, what);
  }
  return made;
}

}  // namespace cadre::ps
