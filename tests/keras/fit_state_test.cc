// The fit state BackupAndRestore keeps: its numbers are its own, written with %.17g, so one
// that does not parse, or is out of a double's range, is damage.
#include "keras/fit_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::keras::internal {
namespace {

TEST(FitStateTest, NumbersRoundTripAndOutOfRangeOnesAreDataLoss) {
  FitState state;
  state.start_step = 120;
  state.learning_rate = 0.1;
  state.history.epoch = {0};
  state.history.history["loss"] = {std::numeric_limits<double>::quiet_NaN()};
  FitState read = decode_fit_state(encode_fit_state(state), "s");
  EXPECT_EQ(read.start_step, 120);
  EXPECT_EQ(read.learning_rate, 0.1);
  EXPECT_TRUE(std::isnan(read.history.history["loss"][0]));
  for (const char* number : {"1e400", "1e-400", "0.1x", "+0.1"}) {
    EXPECT_THROW(decode_fit_state(str_cat("start_step 0\nlearning_rate ", number), "s"),
                 DataLossError)
        << number;
  }
  EXPECT_THROW(decode_logs("loss=1e400\n"), DataLossError);
}

}  // namespace
}  // namespace cadre::keras::internal
