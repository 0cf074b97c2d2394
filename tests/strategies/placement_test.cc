// Where ParameterServerStrategy puts variables: greedy by bytes or round robin, large ones
// in row slices over several ps tasks.
#include "strategies/ps/placement.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

// Each slice's bytes, and that the slices cover the rows in order.
std::vector<int64_t> slice_bytes(const std::vector<ps::Slice>& slices, int64_t rows,
                                 int64_t row_bytes) {
  std::vector<int64_t> bytes;
  int64_t next = 0;
  for (const ps::Slice& s : slices) {
    EXPECT_EQ(s.first_row, next) << s.name;
    next += s.rows;
    bytes.push_back(s.rows * row_bytes);
  }
  EXPECT_EQ(next, rows);
  return bytes;
}

// A variable larger than a slice may be gets as many slices as it needs, several per ps
// task, each under the largest slice, spread evenly; names stay "<name>/part_<k>".
TEST(PlacementTest, VariablesLargerThanTheLargestSliceGetAsManySlicesAsTheyNeed) {
  const int64_t budget = 4000;
  Placement placement(2, PlacementOptions(), budget);
  // 301 rows of 40 bytes: 12,040 bytes, three times the budget.
  std::vector<ps::Slice> big = placement.place("big", Shape{301, 10}, DType::kFloat32);
  ASSERT_GE(big.size(), 3u);
  std::vector<int64_t> bytes = slice_bytes(big, 301, 40);
  int64_t on[2] = {0, 0};
  for (size_t k = 0; k < big.size(); ++k) {
    EXPECT_LE(bytes[k], budget) << big[k].name;
    EXPECT_EQ(big[k].name, "big/part_" + std::to_string(k));
    on[big[k].ps] += bytes[k];
  }
  EXPECT_GT(on[0], 0);
  EXPECT_GT(on[1], 0);
  EXPECT_LE(std::abs(on[0] - on[1]), budget) << on[0] << " against " << on[1];

  // Neither max_shards nor a large min_slice_bytes holds a slice over the budget.
  PlacementOptions one;
  one.max_shards = 1;
  one.min_slice_bytes = int64_t{1} << 40;
  for (const ps::Slice& s :
       Placement(3, one, budget).place("w", Shape{1000, 10}, DType::kFloat32)) {
    EXPECT_LE(s.rows * 40, budget) << s.name;
  }
  // Rows larger than the budget: a slice each. Small variables stay whole.
  EXPECT_EQ(placement.place("wide", Shape{3, 2000}, DType::kFloat32).size(), 3u);
  EXPECT_EQ(placement.place("bias", Shape{10}, DType::kFloat32).size(), 1u);
  EXPECT_EQ(placement.place("empty", Shape{0, 10}, DType::kFloat32).size(), 1u);
}

TEST(PlacementTest, RoundRobinSpreadsTheSlicesOfALargeVariableInTurns) {
  PlacementOptions options;
  options.policy = PlacementOptions::Policy::kRoundRobin;
  Placement placement(3, options, 1000);
  std::vector<int> where;
  for (const ps::Slice& s : placement.place("v", Shape{1000}, DType::kFloat32)) {
    EXPECT_LE(s.rows * 4, 1000) << s.name;
    where.push_back(s.ps);
  }
  EXPECT_EQ(where, (std::vector<int>{0, 1, 2, 0}));
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
