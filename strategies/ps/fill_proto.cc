#include "strategies/ps/fill_proto.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/message_budget.h"

namespace cadre::ps {

void to_proto(const nn::InitialFill& fill, int64_t first_element, InitialFill* out) {
  out->set_kind(static_cast<int32_t>(fill.kind));
  out->set_a(fill.a);
  out->set_b(fill.b);
  out->set_philox_key(fill.key.key);
  out->set_philox_offset(fill.key.offset);
  out->set_first_element(first_element);
}

Tensor filled(const InitialFill& fill, DType dtype, const Shape& shape, std::string_view what) {
  using Kind = nn::InitialFill::Kind;
  if (fill.kind() < static_cast<int32_t>(Kind::kConstant) ||
      fill.kind() > static_cast<int32_t>(Kind::kTruncatedNormal)) {
    throw InvalidArgumentError(str_cat(what, ": an initial value of unknown kind ", fill.kind()));
  }
  if (fill.first_element() < 0) {
    throw InvalidArgumentError(
        str_cat(what, ": an initial value from element ", fill.first_element()));
  }
  nn::InitialFill made{static_cast<Kind>(fill.kind()),
                       fill.a(),
                       fill.b(),
                       {fill.philox_key(), fill.philox_offset()}};
  Tensor value = Tensor::empty(shape, dtype, Device::cpu(0));
  try {
    nn::fill_elements(made, fill.first_element(), value, kFillChunkBytes);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(str_cat(what, ": ", e.what()));
  }
  return value;
}

}  // namespace cadre::ps
