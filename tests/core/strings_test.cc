// parse_double, the one parser of numbers the framework reads back from its text files.
#include "core/base/strings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace cadre {
namespace {

TEST(ParseDoubleTest, ReadsWhatPrintfAndStreamsWrite) {
  EXPECT_EQ(parse_double("0.25"), 0.25);
  EXPECT_EQ(parse_double("-1.5"), -1.5);
  EXPECT_EQ(parse_double("1.7e+09"), 1.7e9);
  EXPECT_EQ(parse_double("1764000000.125"), 1764000000.125);
  EXPECT_EQ(parse_double("0.10000000000000001"), 0.1);  // %.17g of 0.1
  EXPECT_EQ(parse_double("inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_double("-inf"), -std::numeric_limits<double>::infinity());
  ASSERT_TRUE(parse_double("nan"));
  EXPECT_TRUE(std::isnan(*parse_double("nan")));
  // The smallest subnormal, as %.17g prints it, is in range.
  EXPECT_EQ(parse_double("4.9406564584124654e-324"), std::numeric_limits<double>::denorm_min());
}

TEST(ParseDoubleTest, AcceptsOnlyAFullMatch) {
  for (const char* text : {"", " 1", "1 ", "+1", "1x", "1e", ".", "0x10", "one", "1,5"}) {
    EXPECT_FALSE(parse_double(text)) << "'" << text << "'";
  }
}

TEST(ParseDoubleTest, OutOfRangeIsRejectedOrSaturatesAsAsked) {
  for (const char* text : {"1e400", "-1e400", "1e-400"}) {
    EXPECT_FALSE(parse_double(text)) << text;
    EXPECT_FALSE(parse_double(text, OutOfRange::kReject)) << text;
  }
  EXPECT_EQ(parse_double("1e400", OutOfRange::kSaturate), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_double("-1e400", OutOfRange::kSaturate),
            -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_double("1e-400", OutOfRange::kSaturate), 0.0);
  // Saturating changes nothing else.
  EXPECT_EQ(parse_double("2.5", OutOfRange::kSaturate), 2.5);
  EXPECT_FALSE(parse_double("1e400x", OutOfRange::kSaturate));
}

}  // namespace
}  // namespace cadre
