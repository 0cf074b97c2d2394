#include "core/kernels/registry.h"

#include <string>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::kernels {

void throw_missing_kernel(std::string_view kernel, Device device) {
  throw UnimplementedError(
      str_cat("no ", kernel, " kernel is registered for ", device.to_string()));
}

}  // namespace cadre::kernels
