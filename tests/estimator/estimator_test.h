// The fixture of the Estimator's tests (estimator_test.cc, predict_export_warm_start_test.cc):
// a temporary directory, removed after the test, for the model_dirs.
#pragma once

#include <string>

#include "tests/support/temp_dir.h"

namespace cadre::testing {

class EstimatorTest : public TempDirTest {
 protected:
  std::string model_dir(const std::string& name = "model") const { return path(name); }
};

}  // namespace cadre::testing
