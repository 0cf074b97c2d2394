#include "cadre/nn/variable.h"

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "core/nn/deferred_copy.h"

namespace cadre::nn {

Variable::Variable(VariableSpec spec, Tensor value)
    : spec_(std::move(spec)), value_(std::move(value)) {}

Tensor Variable::read() const {
  if (remote_) {
    finish_deferred_copies();  // the fetch writes the local copy
    remote_->fetch(value_);
  }
  return watched();
}

Tensor Variable::read_rows(const Tensor& ids) const {
  if (remote_) {
    finish_deferred_copies();
    remote_->fetch_rows(value_, ids);
  }
  return watched();
}

Tensor Variable::watched() const {
  if (spec_.trainable && autodiff::any_tape_active()) autodiff::watch_on_active_tapes(value_);
  Device here = default_device();
  if (value_.device() == here) return value_;
  return to_device(value_, here);  // recorded: the gradient flows back to this device
}

void Variable::assign(const Tensor& value) {
  if (value.shape() != value_.shape()) {
    throw InvalidArgumentError(str_cat("assign to variable '", name(), "': shape ", value.shape(),
                                       " differs from the variable's ", value_.shape()));
  }
  finish_deferred_copies();
  value_.assign(value);
}

}  // namespace cadre::nn
