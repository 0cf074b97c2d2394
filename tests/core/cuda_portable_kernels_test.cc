// The CUDA random and optimizer kernels' bodies run on the host against the CPU kernels, and
// the device-independent parts of the GPU runtime (device errors, transfers, precision) on a
// machine without a GPU (convolution and pooling: cuda_portable_conv_test.cc).
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/runtime/gpu_convolution.h"
#include "cadre/runtime/precision.h"
#include "core/backend/portable/optimizer_ops.h"
#include "core/backend/portable/random_ops.h"
#include "core/kernels/nn.h"
#include "core/kernels/optimizer.h"
#include "core/kernels/random.h"
#include "core/kernels/transfer.h"
#include "core/tensor/device_backend.h"
#include "tests/core/portable_test_util.h"

namespace cadre {
namespace {

namespace p = backend::portable;
using testing::all_close;
using testing::host_ptr;
using testing::kCpu;
using testing::poisoned;
using testing::random_values;
using testing::run_on_host;
using testing::same_bytes;

TEST(CudaPortableTest, RandomStreamsMatchTheCpuBitForBit) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    visit_float_dtype(dtype, "test", [&]<typename T>() {
      for (int64_t n : {1, 2, 3, 4, 5, 1001, 4096}) {
        Generator gen(5, 7);
        gen.reserve(123);  // a stream that does not start at block 0
        PhiloxKey key = gen.reserve(0);
        using Dist = kernels::RandomDistribution;
        for (Dist dist : {Dist::kUniform, Dist::kNormal, Dist::kTruncatedNormal}) {
          Tensor cpu = poisoned({n}, dtype), host = poisoned({n}, dtype);
          kernels::random.get(kCpu)(dist, -2, 3, key, cpu);
          T* out = host_ptr<T>(host);
          if (dist == Dist::kUniform) {
            run_on_host((n + 3) / 4, p::UniformBlock<T>{out, n, key.key, key.offset, -2, 3});
          } else if (dist == Dist::kNormal) {
            run_on_host((n + 1) / 2, p::NormalBlock<T>{out, n, key.key, key.offset, -2, 3});
          } else {
            run_on_host(n, p::TruncatedNormalElement<T>{out, key.key, key.offset, -2, 3});
          }
          EXPECT_TRUE(same_bytes(host, cpu))
              << dtype << " n=" << n << " dist " << static_cast<int>(dist);
        }
        Tensor cpu = poisoned({n}, dtype), host = poisoned({n}, dtype);
        kernels::dropout_mask.get(kCpu)(0.3, key, cpu);
        run_on_host((n + 3) / 4, p::DropoutBlock<T>{host_ptr<T>(host), n, key.key, key.offset,
                                                    static_cast<T>(1.0 / 0.7), 0.3f});
        EXPECT_TRUE(same_bytes(host, cpu)) << "dropout " << dtype << " n=" << n;
      }
    });
  }
}

// Runs `rule` over `vars` the way the CUDA kernel does: a table of runs of blocks, each
// block strided over by `threads` threads.
template <typename T, typename Rule>
void fused_on_host(std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                   std::vector<std::vector<Tensor>*> slots, const Rule& rule) {
  constexpr int64_t kPerBlock = 1024;
  p::UpdateTable<T> table;
  auto slot = [&](size_t k, size_t i) -> T* {
    return k < slots.size() ? host_ptr<T>((*slots[k])[i]) : nullptr;
  };
  for (size_t i = 0; i < vars.size(); ++i) {
    table.add(host_ptr<T>(vars[i]), host_ptr<T>(grads[i]), slot(0, i), slot(1, i), slot(2, i),
              vars[i].numel(), kPerBlock);
  }
  for (int64_t block = 0; block < table.total_blocks; ++block) {
    for (int thread = 0; thread < 256; ++thread) {
      p::update_block(table, rule, block, kPerBlock, thread, 256);
    }
  }
}

std::vector<Tensor> copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}

TEST(CudaPortableTest, FusedOptimizerUpdatesMatchTheCpu) {
  const std::vector<int64_t> sizes = {1, 1000, 1024, 1025, 3000};
  std::vector<Tensor> vars, grads, s0, s1, s2;
  for (size_t i = 0; i < sizes.size(); ++i) {
    vars.push_back(random_values({sizes[i]}, DType::kFloat32, 10 + i, false));
    grads.push_back(random_values({sizes[i]}, DType::kFloat32, 20 + i, false));
    s0.push_back(abs(random_values({sizes[i]}, DType::kFloat32, 30 + i, false)));
    s1.push_back(abs(random_values({sizes[i]}, DType::kFloat32, 40 + i, false)));
    s2.push_back(random_values({sizes[i]}, DType::kFloat32, 50 + i, false) * 0.1);
  }
  auto check_all = [&](const char* what, const std::vector<Tensor>& a,
                       const std::vector<Tensor>& b) {
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bytes(a[i], b[i])) << what << " " << i;
  };
  for (bool nesterov : {false, true}) {
    for (double momentum : {0.0, 0.9}) {
      auto cv = copies(vars), cm = copies(s0), hv = copies(vars), hm = copies(s0);
      kernels::SgdParams params{0.05, momentum, nesterov};
      kernels::sgd_update.get(kCpu)(cv, grads, cm, params);
      fused_on_host<float>(hv, grads, {&hm},
                           p::SgdRule<float>{0.05f, float(momentum), momentum != 0, nesterov});
      check_all("sgd", hv, cv);
      check_all("sgd momentum", hm, cm);
    }
  }
  {
    auto cv = copies(vars), cm = copies(s0), cv2 = copies(s1);
    auto hv = copies(vars), hm = copies(s0), hv2 = copies(s1);
    kernels::AdamParams params{0.01, 0.9, 0.999, 1e-7};
    kernels::adam_update.get(kCpu)(cv, grads, cm, cv2, params);
    fused_on_host<float>(hv, grads, {&hm, &hv2},
                         p::AdamRule<float>{0.01f, 0.9f, 0.999f, 1e-7f, 1 - 0.9f, 1 - 0.999f});
    check_all("adam", hv, cv);
    check_all("adam m", hm, cm);
    check_all("adam v", hv2, cv2);
  }
  {
    auto cv = copies(vars), ca = copies(s0), hv = copies(vars), ha = copies(s0);
    kernels::adagrad_update.get(kCpu)(cv, grads, ca, kernels::AdagradParams{0.1, 1e-7});
    fused_on_host<float>(hv, grads, {&ha}, p::AdagradRule<float>{0.1f, 1e-7f});
    check_all("adagrad", hv, cv);
    check_all("adagrad accumulator", ha, ca);
  }
  for (bool centered : {false, true}) {
    for (double momentum : {0.0, 0.5}) {
      auto cv = copies(vars), cs = copies(s1), cm = copies(s0), cg = copies(s2);
      auto hv = copies(vars), hs = copies(s1), hm = copies(s0), hg = copies(s2);
      kernels::RmsPropParams params{0.01, 0.9, momentum, 1e-7, centered};
      kernels::rmsprop_update.get(kCpu)(cv, grads, cs, cm, cg, params);
      std::vector<std::vector<Tensor>*> slots = {&hs, momentum > 0 ? &hm : nullptr,
                                                 centered ? &hg : nullptr};
      // Slots the rule does not use are passed as null, as the CUDA kernel does.
      p::UpdateTable<float> table;
      for (size_t i = 0; i < hv.size(); ++i) {
        table.add(host_ptr<float>(hv[i]), host_ptr<float>(grads[i]), host_ptr<float>(hs[i]),
                  momentum > 0 ? host_ptr<float>(hm[i]) : nullptr,
                  centered ? host_ptr<float>(hg[i]) : nullptr, hv[i].numel(), 1024);
      }
      p::RmsPropRule<float> rule{0.01f, 0.9f, float(momentum), 1e-7f, momentum > 0, centered};
      for (int64_t block = 0; block < table.total_blocks; ++block) {
        for (int thread = 0; thread < 256; ++thread)
          p::update_block(table, rule, block, 1024, thread, 256);
      }
      check_all("rmsprop", hv, cv);
      check_all("rmsprop mean square", hs, cs);
      if (momentum > 0) check_all("rmsprop momentum", hm, cm);
      if (centered) check_all("rmsprop mean gradient", hg, cg);
    }
  }
}

TEST(CudaPortableTest, UpdateTableCoversEveryElementOnce) {
  p::UpdateTable<float> table;
  std::vector<std::vector<float>> data;
  for (int64_t n : {5, 1024, 1, 4097, 2048}) data.emplace_back(static_cast<size_t>(n), 0.f);
  std::vector<float> zero(5000, 0.f);
  for (auto& d : data) {
    table.add(d.data(), zero.data(), nullptr, nullptr, nullptr, static_cast<int64_t>(d.size()),
              1024);
  }
  struct Count {
    CADRE_HOST_DEVICE void operator()(float& w, float, float*, float*, float*) const { w += 1; }
  };
  for (int64_t block = 0; block < table.total_blocks; ++block) {
    for (int thread = 0; thread < 256; ++thread)
      p::update_block(table, Count{}, block, 1024, thread, 256);
  }
  for (const auto& d : data) {
    for (float v : d) ASSERT_EQ(v, 1.f);
  }
}

TEST(GpuRuntimeTest, MissingGpusAreClearErrorsListingTheDevices) {
  int gpus = num_gpus();
  std::string text = "gpu:" + std::to_string(gpus + 2);
  try {
    parse_device(text);
    FAIL() << text << " was accepted";
  } catch (const InvalidArgumentError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_NE(message.find("available devices: cpu:0"), std::string::npos) << message;
  }
  EXPECT_THROW(Tensor::zeros({2}, DType::kFloat32, Device::gpu(gpus)), InvalidArgumentError);
  EXPECT_THROW(memory_stats(Device::gpu(gpus)), InvalidArgumentError);
  EXPECT_GE(memory_stats(kCpu).peak_bytes_in_use, memory_stats(kCpu).bytes_in_use);
}

TEST(GpuRuntimeTest, OutOfMemoryNamesTheTensor) {
  try {
    Tensor::empty({int64_t{1} << 40, int64_t{1} << 20}, DType::kFloat32, kCpu);
    FAIL() << "a 4 EiB tensor was allocated";
  } catch (const ResourceExhaustedError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("float32 tensor of shape [1099511627776, 1048576]"), std::string::npos)
        << message;
    // Refused before any allocation, saying what the process may use.
    EXPECT_NE(message.find("cpu:0 may use"), std::string::npos) << message;
  }
}

TEST(GpuRuntimeTest, TransfersWorkBetweenHostDevices) {
  Tensor src = random_values({3, 5}, DType::kFloat32, 5, false);
  Tensor pinned = empty_pinned({3, 5}, DType::kFloat32);
  EXPECT_TRUE(pinned.device().is_cpu());
  pinned.assign(src);
  AsyncCopy copy = to_device_async(pinned.transpose({1, 0}), Device::cpu(1));
  copy.transfer.wait();
  EXPECT_TRUE(copy.transfer.ready());
  EXPECT_EQ(copy.tensor.to_vector<float>(), src.transpose({1, 0}).contiguous().to_vector<float>());
  Tensor back = empty_pinned({5, 3}, DType::kFloat32);
  Transfer t = to_host_async(copy.tensor, back);
  t.wait();
  EXPECT_EQ(back.to_vector<float>(), copy.tensor.to_vector<float>());
  EXPECT_THROW(to_host_async(copy.tensor, pinned), InvalidArgumentError);  // shape mismatch
}

TEST(GpuRuntimeTest, Float32PrecisionSetting) {
  EXPECT_EQ(float32_precision(), Float32Precision::kFloat32);
  EXPECT_EQ(parse_float32_precision("tf32"), Float32Precision::kTF32);
  EXPECT_EQ(parse_float32_precision("bf16"), Float32Precision::kBFloat16);
  EXPECT_EQ(float32_precision_name(Float32Precision::kTF32), "tf32");
  EXPECT_THROW(parse_float32_precision("fp8"), InvalidArgumentError);
}

TEST(GpuRuntimeTest, GpuConvolutionSetting) {
  EXPECT_EQ(gpu_convolution(), GpuConvolution::kAutotune);
  for (GpuConvolution c :
       {GpuConvolution::kAutotune, GpuConvolution::kCudnn, GpuConvolution::kIm2col}) {
    EXPECT_EQ(parse_gpu_convolution(gpu_convolution_name(c)), c);
  }
  try {
    parse_gpu_convolution("winograd");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("autotune, cudnn or im2col"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cadre
