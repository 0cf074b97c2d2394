#include "cadre/ops/random.h"

#include <gtest/gtest.h>

#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/random/philox.h"

namespace cadre {
namespace {

// Known-answer vectors published with Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(PhiloxTest, KnownAnswers) {
  philox::Block zero = philox::generate(0, 0, 0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  philox::Block ones =
      philox::generate(0xffffffffffffffffull, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  philox::Block pi =
      philox::generate(0x299f31d0a4093822ull, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(RandomTest, ReproducibleBySeedAndStream) {
  Generator a(42, 0), b(42, 0), c(42, 1);
  Tensor x = random_uniform({1000}, 0, 1, DType::kFloat32, &a);
  Tensor y = random_uniform({1000}, 0, 1, DType::kFloat32, &b);
  Tensor z = random_uniform({1000}, 0, 1, DType::kFloat32, &c);
  EXPECT_EQ(x.to_vector<float>(), y.to_vector<float>());
  EXPECT_NE(x.to_vector<float>(), z.to_vector<float>());
  // Later draws continue the stream rather than repeating it.
  Tensor x2 = random_uniform({1000}, 0, 1, DType::kFloat32, &a);
  EXPECT_NE(x.to_vector<float>(), x2.to_vector<float>());
  // A generator restored from a saved state continues identically.
  Generator restored(b.state());
  EXPECT_EQ(random_normal({10}, 0, 1, DType::kFloat32, &restored).to_vector<float>(),
            random_normal({10}, 0, 1, DType::kFloat32, &b).to_vector<float>());
}

TEST(RandomTest, DistributionsHaveTheRightMoments) {
  Generator g(7);
  Tensor u = random_uniform({200000}, -2, 4, DType::kFloat64, &g);
  EXPECT_NEAR(mean(u).item<double>(), 1.0, 0.02);
  EXPECT_GE(min(u).item<double>(), -2);
  EXPECT_LT(max(u).item<double>(), 4);
  Tensor n = random_normal({200000}, 3, 2, DType::kFloat32, &g);
  EXPECT_NEAR(mean(n).item<float>(), 3, 0.02);
  EXPECT_NEAR(std::sqrt(mean(square(n - 3.0)).item<float>()), 2, 0.02);
  Tensor t = truncated_normal({200000}, 0, 1, DType::kFloat32, &g);
  EXPECT_LE(max(abs(t)).item<float>(), 2.0f);
  // The standard deviation of a standard normal truncated at two sigma.
  EXPECT_NEAR(std::sqrt(mean(square(t)).item<float>()), 0.87962566, 0.01);
}

}  // namespace
}  // namespace cadre
