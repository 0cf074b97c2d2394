// The matmul, softmax, cross-entropy, pooling, batch-norm and optimizer kernels on gpu:0
// against cpu:0, forward and backward, on fresh random inputs and poisoned outputs (the
// convolutions: cuda_conv_kernels_test.cc). Skipped without a GPU.
#include <gtest/gtest.h>

#include "cadre/runtime/precision.h"
#include "core/kernels/linalg.h"
#include "core/kernels/nn.h"
#include "core/kernels/optimizer.h"
#include "core/tensor/device_backend.h"
#include "tests/core/cuda_test_util.h"

namespace cadre {
namespace {

using kernels::Activation;
using testing::Both;
using testing::CudaTest;
using testing::kGpu;
using testing::kHost;
using testing::matches;
using testing::matches_scaled;
using testing::poisoned_both;
using testing::PrecisionScope;
using testing::random_both;
using testing::ulps;

TEST_F(CudaTest, MatmulEveryLayoutEpilogueAndPrecision) {
  const int64_t m = 129, k = 257, n = 65;
  struct Mode {
    Float32Precision precision;
    double tolerance;
  };
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    std::vector<Mode> modes = {
        {Float32Precision::kFloat32, dtype == DType::kFloat32 ? 2e-6 : 1e-14}};
    if (dtype == DType::kFloat32) {
      modes.push_back({Float32Precision::kTF32, 4e-3});
      modes.push_back({Float32Precision::kBFloat16, 3e-2});
    }
    for (const Mode& mode : modes) {
      PrecisionScope precision(mode.precision);
      for (int64_t batch : {0, 4}) {  // 0: plain matrices
        for (bool shared_b : {false, true}) {
          if (batch == 0 && shared_b) continue;
          for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
              Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
              Shape cs{m, n};
              if (batch > 0) {
                as = Shape{batch, as[0], as[1]};
                if (!shared_b) bs = Shape{batch, bs[0], bs[1]};
                cs = Shape{batch, m, n};
              }
              Both a = random_both(as, dtype, 1), b = random_both(bs, dtype, 2);
              Both bias = random_both({n}, dtype, 3);
              // The product's error scales with the product, also after an activation
              // that squashes it into (-1, 1).
              Tensor product = Tensor::empty(cs, dtype, kHost);
              kernels::matmul.get(kHost)(
                  a.cpu, b.cpu, bias.cpu, product,
                  kernels::MatmulParams{ta, tb, false, Activation::kNone, 0});
              double product_scale = testing::max_abs(product);
              for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kSigmoid,
                                     Activation::kTanh, Activation::kElu}) {
                for (bool with_bias : {false, true}) {
                  kernels::MatmulParams params{ta, tb, false, act, 0.5};
                  Both out = poisoned_both(cs, dtype);
                  kernels::matmul.get(kGpu)(a.gpu, b.gpu, with_bias ? bias.gpu : Tensor(), out.gpu,
                                            params);
                  kernels::matmul.get(kHost)(a.cpu, b.cpu, with_bias ? bias.cpu : Tensor(), out.cpu,
                                             params);
                  EXPECT_TRUE(matches_scaled(out, mode.tolerance, product_scale))
                      << dtype << " " << float32_precision_name(mode.precision) << " batch "
                      << batch << " ta " << ta << " tb " << tb << " act " << static_cast<int>(act)
                      << " bias " << with_bias;
                }
              }
              // out += a·b keeps what out held.
              kernels::MatmulParams accumulate{ta, tb, true, Activation::kNone, 0};
              Both out = random_both(cs, dtype, 4);
              kernels::matmul.get(kGpu)(a.gpu, b.gpu, Tensor(), out.gpu, accumulate);
              kernels::matmul.get(kHost)(a.cpu, b.cpu, Tensor(), out.cpu, accumulate);
              EXPECT_TRUE(matches_scaled(out, mode.tolerance)) << "accumulate";
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaTest, SoftmaxAndCrossEntropyForwardAndBackward) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Shape shape : {Shape{300, 10}, Shape{7, 3000}, Shape{1, 1}}) {
      Both x = random_both(shape, dtype, 5), dy = random_both(shape, dtype, 6);
      for (bool log : {false, true}) {
        Both y = poisoned_both(shape, dtype), dx = poisoned_both(shape, dtype);
        kernels::softmax.get(kGpu)(x.gpu, y.gpu, log);
        kernels::softmax.get(kHost)(x.cpu, y.cpu, log);
        EXPECT_TRUE(matches(y, ulps(dtype, 16), ulps(dtype, 4))) << shape << " log " << log;
        kernels::softmax_grad.get(kGpu)(y.gpu, dy.gpu, dx.gpu, log);
        kernels::softmax_grad.get(kHost)(y.cpu, dy.cpu, dx.cpu, log);
        EXPECT_TRUE(matches(dx, ulps(dtype, 64), ulps(dtype, 64))) << shape << " log " << log;
      }
      for (DType label_dtype : {DType::kInt32, DType::kInt64}) {
        Both labels = testing::both(cast(
            floor(random_uniform({shape[0]}, 0, double(shape[1]), DType::kFloat64)), label_dtype));
        Both loss = poisoned_both({shape[0]}, dtype), probs = poisoned_both(shape, dtype);
        kernels::sparse_xent.get(kGpu)(x.gpu, labels.gpu, loss.gpu, probs.gpu);
        kernels::sparse_xent.get(kHost)(x.cpu, labels.cpu, loss.cpu, probs.cpu);
        EXPECT_TRUE(matches(loss, ulps(dtype, 16), ulps(dtype, 16))) << shape;
        EXPECT_TRUE(matches(probs, ulps(dtype, 16), ulps(dtype, 4))) << shape;
        Both dloss = random_both({shape[0]}, dtype, 7), dlogits = poisoned_both(shape, dtype);
        kernels::sparse_xent_grad.get(kGpu)(probs.gpu, labels.gpu, dloss.gpu, dlogits.gpu);
        kernels::sparse_xent_grad.get(kHost)(probs.cpu, labels.cpu, dloss.cpu, dlogits.cpu);
        EXPECT_TRUE(matches(dlogits, ulps(dtype, 16), ulps(dtype, 16))) << shape;
      }
    }
  }
}

TEST_F(CudaTest, PoolingForwardAndBackward) {
  Shape xs{4, 13, 14, 6};
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (auto kind : {kernels::PoolKind::kMax, kernels::PoolKind::kAvg}) {
      kernels::Pool2DParams params;
      params.kind = kind;
      params.window = {3, 3};
      params.strides = {2, 2};
      params.pad_begin = {1, 1};
      params.pad_end = {1, 1};
      Shape ys{4, 7, 7, 6};
      bool max = kind == kernels::PoolKind::kMax;
      Both x = random_both(xs, dtype, 12), dy = random_both(ys, dtype, 13);
      Both y = poisoned_both(ys, dtype), arg = poisoned_both(ys, DType::kInt32);
      Both no_arg;
      Both& argmax = max ? arg : no_arg;
      kernels::pool2d.get(kGpu)(x.gpu, y.gpu, argmax.gpu, params);
      kernels::pool2d.get(kHost)(x.cpu, y.cpu, argmax.cpu, params);
      // Windows are summed in the CPU's order: the same bits.
      EXPECT_TRUE(matches(y, 0)) << "max " << max;
      if (max) {
        EXPECT_TRUE(matches(arg, 0));
      }
      Both dx = poisoned_both(xs, dtype);
      kernels::pool2d_grad.get(kGpu)(dy.gpu, argmax.gpu, dx.gpu, params);
      kernels::pool2d_grad.get(kHost)(dy.cpu, argmax.cpu, dx.cpu, params);
      EXPECT_TRUE(matches(dx, 0)) << "max " << max;
    }
  }
}

TEST_F(CudaTest, BatchNormTrainingInferenceAndGradients) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (Shape shape : {Shape{2048, 24}, Shape{3, 70}, Shape{100000, 3}}) {
      int64_t c = shape[1];
      Both x = random_both(shape, dtype, 14), gamma = random_both({c}, dtype, 15);
      Both beta = random_both({c}, dtype, 16), dy = random_both(shape, dtype, 17);
      Both y = poisoned_both(shape, dtype), mean = poisoned_both({c}, dtype);
      Both var = poisoned_both({c}, dtype), inv = poisoned_both({c}, dtype);
      kernels::batch_norm_train.get(kGpu)(x.gpu, gamma.gpu, beta.gpu, 1e-3, y.gpu, mean.gpu,
                                          var.gpu, inv.gpu);
      kernels::batch_norm_train.get(kHost)(x.cpu, gamma.cpu, beta.cpu, 1e-3, y.cpu, mean.cpu,
                                           var.cpu, inv.cpu);
      double tolerance = ulps(dtype, 64);
      for (const Both* t : {&y, &mean, &var, &inv}) {
        EXPECT_TRUE(matches(*t, tolerance, tolerance)) << shape << " " << dtype;
      }
      Both z = poisoned_both(shape, dtype);
      kernels::batch_norm_infer.get(kGpu)(x.gpu, gamma.gpu, beta.gpu, mean.gpu, var.gpu, 1e-3,
                                          z.gpu);
      kernels::batch_norm_infer.get(kHost)(x.cpu, gamma.cpu, beta.cpu, mean.cpu, var.cpu, 1e-3,
                                           z.cpu);
      EXPECT_TRUE(matches(z, tolerance, tolerance)) << "inference " << shape;
      Both dx = poisoned_both(shape, dtype), dgamma = poisoned_both({c}, dtype);
      Both dbeta = poisoned_both({c}, dtype);
      kernels::batch_norm_grad.get(kGpu)(x.gpu, dy.gpu, gamma.gpu, mean.gpu, inv.gpu, dx.gpu,
                                         dgamma.gpu, dbeta.gpu);
      kernels::batch_norm_grad.get(kHost)(x.cpu, dy.cpu, gamma.cpu, mean.cpu, inv.cpu, dx.cpu,
                                          dgamma.cpu, dbeta.cpu);
      EXPECT_TRUE(matches_scaled(dx, tolerance)) << "dx " << shape;
      EXPECT_TRUE(matches_scaled(dgamma, tolerance)) << "dgamma " << shape;
      EXPECT_TRUE(matches_scaled(dbeta, tolerance)) << "dbeta " << shape;
    }
  }
}

// 130 variables (more than one launch's table), float32 and float64, three steps of each
// optimizer on both devices.
TEST_F(CudaTest, FusedOptimizersOverManyVariables) {
  struct Model {
    std::vector<Tensor> vars, grads, s0, s1, s2;
  };
  auto make = [](Device device) {
    Model m;
    for (int i = 0; i < 130; ++i) {
      DType dtype = i % 10 == 9 ? DType::kFloat64 : DType::kFloat32;
      int64_t n = i == 0 ? 1 : (i * 37) % 5000 + 1;
      auto value = [&](uint64_t seed) {
        return testing::random_values({n}, dtype, seed * 1000 + i, false).to(device);
      };
      m.vars.push_back(value(1));
      m.grads.push_back(value(2));
      m.s0.push_back(abs(value(3)));
      m.s1.push_back(abs(value(4)));
      m.s2.push_back(value(5) * 0.1);
    }
    return m;
  };
  auto compare = [](const Model& g, const Model& c, const char* what) {
    for (size_t i = 0; i < g.vars.size(); ++i) {
      double tolerance = ulps(g.vars[i].dtype(), 32);
      ASSERT_TRUE(matches(g.vars[i], c.vars[i], tolerance, tolerance)) << what << " variable " << i;
      ASSERT_TRUE(matches(g.s0[i], c.s0[i], tolerance, tolerance)) << what << " slot 0 of " << i;
      ASSERT_TRUE(matches(g.s1[i], c.s1[i], tolerance, tolerance)) << what << " slot 1 of " << i;
      ASSERT_TRUE(matches(g.s2[i], c.s2[i], tolerance, tolerance)) << what << " slot 2 of " << i;
    }
  };
  for (int which = 0; which < 6; ++which) {
    Model g = make(kGpu), c = make(kHost);
    for (int step = 0; step < 3; ++step) {
      for (Model* m : {&g, &c}) {
        Device d = m->vars[0].device();
        switch (which) {
          case 0:
            kernels::sgd_update.get(d)(m->vars, m->grads, m->s0, {0.1, 0, false});
            break;
          case 1:
            kernels::sgd_update.get(d)(m->vars, m->grads, m->s0, {0.1, 0.9, true});
            break;
          case 2:
            kernels::adam_update.get(d)(m->vars, m->grads, m->s0, m->s1, {0.01, 0.9, 0.999, 1e-7});
            break;
          case 3:
            kernels::adagrad_update.get(d)(m->vars, m->grads, m->s0, {0.1, 1e-7});
            break;
          case 4:
            kernels::rmsprop_update.get(d)(m->vars, m->grads, m->s0, m->s1, m->s2,
                                           {0.01, 0.9, 0.5, 1e-7, true});
            break;
          default:
            kernels::rmsprop_update.get(d)(m->vars, m->grads, m->s0, m->s1, m->s2,
                                           {0.01, 0.9, 0, 1e-7, false});
        }
      }
    }
    compare(g, c, std::to_string(which).c_str());
  }
}

}  // namespace
}  // namespace cadre
