// The gradients of convolution against central finite differences in float64, and its
// float32 kernels (oneDNN, Cadre's products and one-channel loops, the convolution fused
// with a max pooling) against the float64 ones.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "cadre/ops/nn.h"
#include "cadre/runtime/profiler.h"
#include "cadre/runtime/threading.h"
#include "core/backend/cpu/conv_one_channel.h"
#include "tests/support/grad_check.h"

namespace cadre {
namespace {

using testing::expect_gradients_match;
using testing::random_tensor;
using Inputs = std::vector<Tensor>;

struct ConvCase {
  Shape x, w;
  std::array<int64_t, 2> strides, dilations;
  Padding padding;
  Activation act;
};

TEST(GradTest, Conv2D) {
  std::vector<ConvCase> cases = {
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, Padding::kValid, Activation::kNone},
      {{1, 6, 5, 2}, {3, 2, 2, 3}, {2, 1}, {1, 1}, Padding::kSame, Activation::kNone},
      {{1, 7, 7, 2}, {3, 3, 2, 2}, {1, 1}, {2, 2}, Padding::kSame, Activation::kNone},
      {{2, 5, 6, 1}, {2, 2, 1, 3}, {2, 2}, {1, 1}, Padding::kValid, Activation::kRelu},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    expect_gradients_match(
        [c](const Inputs& v) {
          return conv2d(v[0], v[1], v[2], c.strides, c.padding, c.dilations, c.act);
        },
        {random_tensor(c.x, 70), random_tensor(c.w, 71), random_tensor({c.w[3]}, 72)});
  }
}

// Random input, filters and bias of a convolution in `dtype` (seeds seed, seed + 1, seed +
// 2), the filters and bias (and the input when with_input) watched on `tape` as `sources`.
struct ConvInputs {
  Tensor x, w, b;
  std::vector<Tensor> sources;
};
ConvInputs watched_conv_inputs(const Shape& x, const Shape& w, int seed, DType dtype,
                               bool with_input, GradientTape& tape) {
  ConvInputs in{random_tensor(x, seed).cast(dtype),
                random_tensor(w, seed + 1).cast(dtype),
                random_tensor({w[3]}, seed + 2).cast(dtype),
                {}};
  in.sources = {in.w, in.b};
  if (with_input) in.sources.push_back(in.x);
  for (const Tensor& t : in.sources) tape.watch(t);
  return in;
}

// conv2d's float32 kernels (oneDNN, and Cadre's own products and loops) against the float64
// ones that the test above checks: the output and the gradients of the filters, the bias
// and (when with_input) the input.
void expect_float32_matches_float64(const ConvCase& c, bool with_input) {
  SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() +
               (with_input ? ", input gradient too" : ", filters only"));
  auto gradients = [&](DType dtype) {
    GradientTape tape;
    auto [x, w, b, sources] = watched_conv_inputs(c.x, c.w, 70, dtype, with_input, tape);
    Tensor y = conv2d(x, w, b, c.strides, c.padding, c.dilations, c.act);
    Tensor r = random_tensor(y.shape(), 99, 0.5, 1.5).cast(dtype);
    std::vector<Tensor> out{y};
    for (const Gradient& g : tape.gradient(sum(mul(y, r)), sources)) {
      out.push_back(g.to_dense().cast(DType::kFloat64));
    }
    out[0] = out[0].cast(DType::kFloat64);
    return out;
  };
  std::vector<Tensor> got = gradients(DType::kFloat32), want = gradients(DType::kFloat64);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<double> a = got[i].to_vector<double>(), e = want[i].to_vector<double>();
    ASSERT_EQ(a.size(), e.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_NEAR(a[k], e[k], 1e-4 * std::max(1.0, std::abs(e[k])))
          << "output " << i << " element " << k;
    }
  }
}

// Chosen geometries, with and without the input's gradient, and the gradients' bits the
// same at any thread count.
TEST(GradTest, Conv2DFloat32MatchesFloat64) {
  std::vector<ConvCase> cases = {
      {{9, 12, 11, 1}, {3, 3, 1, 32}, {1, 1}, {1, 1}, Padding::kValid, Activation::kRelu},
      {{2, 9, 8, 1}, {3, 2, 1, 5}, {1, 1}, {1, 1}, Padding::kSame, Activation::kNone},
      {{2, 9, 8, 1}, {5, 5, 1, 3}, {1, 1}, {1, 1}, Padding::kSame, Activation::kRelu},
      {{2, 9, 8, 1}, {3, 3, 1, 4}, {2, 2}, {1, 1}, Padding::kSame, Activation::kNone},
      {{2, 7, 7, 3}, {3, 3, 3, 8}, {1, 1}, {1, 1}, Padding::kValid, Activation::kRelu},
      {{3, 9, 8, 1}, {2, 2, 1, 16}, {1, 1}, {1, 1}, Padding::kSame, Activation::kRelu},
      // Through the products (conv_gemm.cc): strides, dilations, a 2x2 SAME filter (its
      // padding at the end only), and rows of taps longer than a tile (two tiles per image).
      {{3, 9, 8, 8}, {3, 3, 8, 16}, {1, 1}, {1, 1}, Padding::kValid, Activation::kRelu},
      {{2, 11, 10, 8}, {3, 3, 8, 24}, {2, 2}, {1, 1}, Padding::kValid, Activation::kNone},
      {{2, 12, 12, 8}, {3, 3, 8, 16}, {1, 1}, {2, 2}, Padding::kValid, Activation::kRelu},
      {{2, 9, 8, 16}, {2, 2, 16, 32}, {1, 1}, {1, 1}, Padding::kSame, Activation::kRelu},
      {{1, 30, 30, 32}, {5, 5, 32, 64}, {1, 1}, {1, 1}, Padding::kValid, Activation::kNone},
      // Through oneDNN's backward primitives: more inputs than outputs, padding in front.
      {{3, 9, 8, 16}, {3, 3, 16, 8}, {1, 1}, {1, 1}, Padding::kSame, Activation::kRelu},
      {{2, 11, 10, 8}, {5, 5, 8, 12}, {2, 2}, {1, 1}, Padding::kSame, Activation::kNone},
  };
  for (const ConvCase& c : cases) {
    for (bool with_input : {true, false}) expect_float32_matches_float64(c, with_input);
  }
  // Many images (several blocks or units of the filter gradient's sum): the same bits at
  // one and two threads, for one input channel (its own loop) and for eight (products).
  for (int64_t channels : {1, 8}) {
    SCOPED_TRACE(std::to_string(channels) + " input channel(s)");
    Tensor x = random_tensor({37, 10, 10, channels}, 73).cast(DType::kFloat32);
    Tensor w = random_tensor({3, 3, channels, 16}, 74).cast(DType::kFloat32);
    auto gradients = [&](int threads) {
      set_intra_op_threads(threads);
      GradientTape tape;
      tape.watch(w);
      tape.watch(x);
      // SAME for one channel (its loop's border path), VALID for eight (the products).
      Tensor y = conv2d(x, w, Tensor(), {1, 1}, channels == 1 ? Padding::kSame : Padding::kValid,
                        {1, 1}, Activation::kNone);
      std::vector<std::vector<float>> out;
      for (const Gradient& g : tape.gradient(sum(mul(y, y)), {w, x})) {
        out.push_back(g.to_dense().to_vector<float>());
      }
      return out;
    };
    int budget = intra_op_threads_budget();
    std::vector<std::vector<float>> one = gradients(1), two = gradients(2);
    set_intra_op_threads(budget);
    EXPECT_EQ(one, two);
  }
}

// An empty batch, and a convolution without filters, through each float32 path (one
// channel, oneDNN, products): zero gradients of the right shapes. oneDNN refuses both.
TEST(GradTest, Conv2DOfAnEmptyBatchOrWithoutFiltersHasZeroGradients) {
  for (int64_t channels : {1, 3, 8}) {
    for (auto [images, filters] : {std::pair<int64_t, int64_t>{0, 16}, {2, 0}}) {
      SCOPED_TRACE(std::to_string(channels) + " input channel(s), " + std::to_string(images) +
                   " images, " + std::to_string(filters) + " filters");
      Tensor x = random_tensor({images, 6, 6, channels}, 75).cast(DType::kFloat32);
      Tensor w = random_tensor({3, 3, channels, filters}, 76).cast(DType::kFloat32);
      Tensor b = random_tensor({filters}, 77).cast(DType::kFloat32);
      GradientTape tape;
      for (const Tensor& t : {w, b, x}) tape.watch(t);
      Tensor y = conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu);
      std::vector<Gradient> g = tape.gradient(sum(y), {w, b, x});
      for (size_t i = 0; i < g.size(); ++i) {
        Tensor dense = g[i].to_dense();
        EXPECT_EQ(dense.shape(), (std::vector<Tensor>{w, b, x}[i].shape()));
        EXPECT_EQ(dense.to_vector<float>(), std::vector<float>(dense.numel(), 0.f));
      }
    }
  }
}

// Random geometries through every float32 path (products, the one-channel loops, oneDNN):
// channels, filter sizes, strides, dilations, padding and the fused ReLU.
TEST(GradTest, Conv2DFloat32MatchesFloat64OnRandomGeometries) {
  std::mt19937 rng(20261126);
  auto pick = [&rng](std::vector<int64_t> from) { return from[rng() % from.size()]; };
  int tried = 0;
  while (tried < 40) {
    ConvCase c{Shape{pick({1, 2, 5}), pick({4, 7, 12}), pick({3, 6, 11}), pick({1, 3, 8, 16})},
               Shape{pick({1, 2, 3, 5}), pick({1, 2, 3}), 0, pick({4, 8, 16, 24, 32})},
               {pick({1, 2}), pick({1, 2})},
               {pick({1, 2}), pick({1, 2})},
               pick({0, 1}) ? Padding::kSame : Padding::kValid,
               pick({0, 1}) ? Activation::kRelu : Activation::kNone};
    c.w = Shape{c.w[0], c.w[1], c.x[3], c.w[3]};
    const int64_t reach_h = (c.w[0] - 1) * c.dilations[0] + 1,
                  reach_w = (c.w[1] - 1) * c.dilations[1] + 1;
    if (c.padding == Padding::kValid && (reach_h > c.x[1] || reach_w > c.x[2])) continue;
    ++tried;
    expect_float32_matches_float64(c, /*with_input=*/rng() % 2 == 0);
  }
}

struct ConvPoolCase {
  Shape x, w;
  Activation act;
  std::array<int64_t, 2> window;
  Padding pool_padding;
  bool fused;  // both passes taken (with the filters and bias only)
};

// A convolution then a max pooling (`through_product`: with a multiplication by one between
// them): the pooled output, the gradients of the filters and bias (and input), then the
// convolution's output (read last); and the kernels that ran.
std::pair<std::vector<std::vector<double>>, std::set<std::string>> conv_then_pool(
    const ConvPoolCase& c, bool with_input, bool through_product, DType dtype) {
  GradientTape tape;
  auto [x, w, b, sources] = watched_conv_inputs(c.x, c.w, 170, dtype, with_input, tape);
  auto session = profiler::ProfilerSession::start();
  Tensor y = conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, c.act);
  Tensor pooled =
      max_pool2d(through_product ? mul(y, ones_like(y)) : y, c.window, c.window, c.pool_padding);
  Tensor r = random_tensor(pooled.shape(), 173, -1.5, 1.5).cast(dtype);
  std::vector<Gradient> grads = tape.gradient(sum(mul(pooled, r)), sources);
  std::set<std::string> kernels;
  for (const profiler::Event& e : session->collect().events) kernels.emplace(e.name);
  std::vector<std::vector<double>> out{pooled.cast(DType::kFloat64).to_vector<double>()};
  for (const Gradient& g : grads)
    out.push_back(g.dense().cast(DType::kFloat64).to_vector<double>());
  out.push_back(y.cast(DType::kFloat64).to_vector<double>());
  return {out, kernels};
}

// A convolution whose output only a max pooling with tiling windows reads: where the
// backend has the passes (kernels::conv2d_max_pool, conv2d_grad_from_max_pool), the pooling
// is computed with the convolution, whose output is then written only when read, and the
// convolution's gradients are read from the pooling's form instead of the input-sized
// tensor between them. Everything must have the bits of the two ops one after the other,
// which a multiplication by one between them forces. Where a pass declines (the input
// gradient of one channel, a 5x5 filter of one channel, float64), the ops run one after the
// other and the result is the same.
TEST(GradTest, Conv2DThenMaxPoolingHasTheBitsOfTheOpsOneAfterTheOther) {
  const std::vector<ConvPoolCase> cases = {
      // An odd number of windows per row (the forward pass takes two at a time).
      {{5, 12, 12, 1}, {3, 3, 1, 32}, Activation::kRelu, {2, 2}, Padding::kValid, true},
      // Rows and columns of the convolution's output that no window covers.
      {{3, 10, 8, 1}, {2, 2, 1, 8}, Activation::kNone, {2, 2}, Padding::kValid, true},
      {{2, 11, 14, 1}, {3, 3, 1, 16}, Activation::kRelu, {3, 3}, Padding::kValid, true},
      {{3, 13, 13, 8}, {3, 3, 8, 16}, Activation::kRelu, {2, 2}, Padding::kValid, false},
      // Windows that start before the output (SAME, padding in front) and end after it.
      {{2, 9, 9, 16}, {3, 3, 16, 32}, Activation::kNone, {3, 3}, Padding::kSame, false},
      // Output channels that are not a multiple of 8, non-square windows.
      {{2, 10, 12, 8}, {3, 3, 8, 20}, Activation::kRelu, {2, 3}, Padding::kValid, false},
      {{2, 9, 9, 1}, {5, 5, 1, 8}, Activation::kRelu, {2, 2}, Padding::kValid, false},
  };
  for (const ConvPoolCase& c : cases) {
    for (bool with_input : {false, true}) {
      SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string() +
                   (with_input ? ", input gradient too" : ""));
      auto run = [&](bool through_product, DType dtype) {
        return conv_then_pool(c, with_input, through_product, dtype);
      };
      auto [fused, kernels] = run(false, DType::kFloat32);
      auto [reference, reference_kernels] = run(true, DType::kFloat32);
      EXPECT_EQ(reference_kernels.count("pool2d_grad"), 1u);
      EXPECT_EQ(reference_kernels.count("conv2d_max_pool"), 0u);
      const bool one_channel = c.x[3] == 1;
      // The forward pass with one channel, in registers; the gradient's for products, and
      // for one channel without the input's gradient.
      EXPECT_EQ(kernels.count("conv2d_max_pool"), c.fused ? 1u : 0u);
      EXPECT_EQ(kernels.count("pool2d"), c.fused ? 0u : 1u);
      const bool gradient_read_as_pooled = one_channel ? c.fused && !with_input : c.w[0] != 5;
      EXPECT_EQ(kernels.count("pool2d_grad"), gradient_read_as_pooled ? 0u : 1u);
      EXPECT_EQ(fused, reference);
      auto [fused64, kernels64] = run(false, DType::kFloat64);
      EXPECT_EQ(kernels64.count("conv2d_max_pool"), 0u);
      EXPECT_EQ(fused64, run(true, DType::kFloat64).first);
    }
  }
  // The convolution's output also used elsewhere (the two gradients add up), and asked for
  // as a source itself (its gradient comes back built).
  for (int64_t channels : {1, 8}) {
    Tensor x = random_tensor({2, 8, 8, channels}, 174).cast(DType::kFloat32);
    Tensor w = random_tensor({3, 3, channels, 16}, 175).cast(DType::kFloat32);
    auto gradients = [&](bool through_product, bool twice) {
      GradientTape tape;
      tape.watch(w);
      Tensor y = conv2d(x, w, Tensor(), {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu);
      Tensor pooled =
          max_pool2d(through_product ? mul(y, ones_like(y)) : y, {2, 2}, {2, 2}, Padding::kValid);
      Tensor loss = twice ? add(sum(pooled), sum(mul(y, y))) : sum(mul(pooled, pooled));
      std::vector<std::vector<float>> out;
      for (const Gradient& g : tape.gradient(loss, {w, y}))
        out.push_back(g.dense().to_vector<float>());
      return out;
    };
    for (bool twice : {true, false}) EXPECT_EQ(gradients(false, twice), gradients(true, twice));
  }
}

// The one-channel loops take 16 channels at a time where the CPU has AVX-512 (else 8): each
// lane is one channel with the same arithmetic, so both widths give the same bits. On a CPU
// without AVX-512 both runs are 8 lanes wide and this shows nothing.
TEST(GradTest, OneChannelConvolutionLoopsGiveTheSameBitsAt8And16Lanes) {
  for (int64_t filters : {16, 32}) {
    SCOPED_TRACE(std::to_string(filters) + " filters");
    Tensor x = random_tensor({17, 14, 14, 1}, 180).cast(DType::kFloat32);
    Tensor w = random_tensor({3, 3, 1, filters}, 181).cast(DType::kFloat32);
    Tensor b = random_tensor({filters}, 182).cast(DType::kFloat32);
    auto run = [&](bool wide) {
      backend::cpu::conv_one_channel::set_wide_lanes(wide);
      std::vector<std::vector<float>> out;
      for (bool pooled : {true, false}) {
        GradientTape tape;
        tape.watch(w);
        tape.watch(b);
        Tensor y = conv2d(x, w, b, {1, 1}, Padding::kSame, {1, 1}, Activation::kRelu);
        Tensor z = pooled ? max_pool2d(y, {2, 2}, {2, 2}, Padding::kValid) : y;
        Tensor r = random_tensor(z.shape(), 183, -1.5, 1.5).cast(DType::kFloat32);
        for (const Gradient& g : tape.gradient(sum(mul(z, r)), {w, b})) {
          out.push_back(g.dense().to_vector<float>());
        }
        out.push_back(z.to_vector<float>());
      }
      backend::cpu::conv_one_channel::set_wide_lanes(true);
      return out;
    };
    EXPECT_EQ(run(false), run(true));
  }
}

// A convolution's output written only when first read holds the values of the filters and
// input it was computed from, even when they are overwritten in place before that (as an
// optimizer updates a variable).
TEST(GradTest, AConvolutionOutputReadLateHasItsInputsValues) {
  Tensor x = random_tensor({2, 10, 10, 1}, 176).cast(DType::kFloat32);
  Tensor w = random_tensor({3, 3, 1, 8}, 177).cast(DType::kFloat32);
  Tensor b = random_tensor({8}, 178).cast(DType::kFloat32);
  const std::vector<float> expected =
      conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu).to_vector<float>();
  Tensor y = conv2d(x, w, b, {1, 1}, Padding::kValid, {1, 1}, Activation::kRelu);
  Tensor pooled = max_pool2d(y, {2, 2}, {2, 2}, Padding::kValid);
  ASSERT_NE(y.buffer()->pending_fill(), nullptr);  // else this test shows nothing
  w.assign(zeros_like(w));
  x.assign(zeros_like(x));
  b.assign(zeros_like(b));
  EXPECT_EQ(y.to_vector<float>(), expected);
  EXPECT_EQ(y.buffer()->pending_fill(), nullptr);
}

}  // namespace
}  // namespace cadre
