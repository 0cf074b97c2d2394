// What the Gloo tests share (gloo_test.cc, gloo_errors_test.cc).
#pragma once

#include "strategies/collectives/gloo/collective.h"

namespace cadre::testing {

// Gloo's options with a timeout of `seconds` for every blocking call.
inline GlooOptions within(double seconds) {
  GlooOptions options;
  options.timeout_seconds = seconds;
  return options;
}

}  // namespace cadre::testing
