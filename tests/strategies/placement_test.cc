// Where ParameterServerStrategy puts variables: greedy by bytes or round robin, large ones
// in row slices over several ps tasks.
#include "strategies/ps/placement.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"

namespace cadre {
namespace {

using ps::Placement;
using ps::PlacementOptions;

TEST(PlacementTest, GreedyBalancesBytesAndSlicesLargeVariables) {
  PlacementOptions options;
  options.min_slice_bytes = 1000;
  Placement placement(2, options);
  EXPECT_EQ(placement.place("a", Shape{10}, DType::kFloat32)[0].ps, 0);  // 40 bytes
  EXPECT_EQ(placement.place("b", Shape{20}, DType::kFloat32)[0].ps, 1);  // 80 bytes
  EXPECT_EQ(placement.place("c", Shape{5}, DType::kFloat32)[0].ps, 0);   // 0 holds less
  // 4,000 bytes: 4 slices of 1,000 would do, but there are 2 ps tasks.
  std::vector<ps::Slice> big = placement.place("big", Shape{101, 10}, DType::kFloat32);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].name, "big/part_0");
  EXPECT_EQ(big[0].ps, 0);  // 60 bytes against 80
  EXPECT_EQ(big[0].rows, 51);
  EXPECT_EQ(big[1].ps, 1);
  EXPECT_EQ(big[1].first_row, 51);
  EXPECT_EQ(big[1].rows, 50);
  EXPECT_EQ(placement.place("step", Shape{}, DType::kInt64).size(), 1u);
  EXPECT_NE(placement.describe().find("ps:1: 3 variable(s), 2088 bytes (b, big/part_1, step)"),
            std::string::npos)
      << placement.describe();

  options.max_shards = 1;
  EXPECT_EQ(Placement(3, options).place("big", Shape{1000, 10}, DType::kFloat32).size(), 1u);
  EXPECT_THROW(Placement(0), InvalidArgumentError);
}

TEST(PlacementTest, RoundRobinTakesTurns) {
  PlacementOptions options;
  options.policy = PlacementOptions::Policy::kRoundRobin;
  Placement placement(3, options);
  std::vector<int> where;
  for (int i = 0; i < 5; ++i) {
    where.push_back(placement.place("v" + std::to_string(i), Shape{1000}, DType::kFloat32)[0].ps);
  }
  EXPECT_EQ(where, (std::vector<int>{0, 1, 2, 0, 1}));
}

}  // namespace
}  // namespace cadre
