#include "cadre/tensor/tensor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "core/tensor/caching_allocator.h"

namespace cadre {
namespace {

TEST(DTypeTest, NamesSizesAndParsing) {
  EXPECT_EQ(dtype_name(DType::kFloat32), "float32");
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(parse_dtype("uint8"), DType::kUInt8);
  try {
    parse_dtype("float128");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("float128"), std::string::npos);
  }
}

TEST(DTypeTest, HalfPrecisionRoundTrips) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f}) {
    EXPECT_EQ(static_cast<float>(Float16(static_cast<float>(Float16(v)))),
              static_cast<float>(Float16(v)));
  }
  EXPECT_EQ(static_cast<float>(Float16(1.0f)), 1.0f);
  EXPECT_EQ(Float16(1.0f).bits, 0x3C00);
  EXPECT_EQ(Float16(-2.0f).bits, 0xC000);
  EXPECT_EQ(Float16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(Float16(1e6f).bits, 0x7C00);            // overflow: infinity
  EXPECT_EQ(Float16(5.9604645e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Float16(1.0009765625f).bits, 0x3C01);
  EXPECT_EQ(Float16(1.00048828125f).bits, 0x3C00);  // a tie rounds to even
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
  EXPECT_EQ(BFloat16(1.00390625f).bits, 0x3F80);  // a tie rounds to even
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

TEST(ShapeTest, BroadcastingRules) {
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{1, 4}, "t"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape{2, 3}, "t"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape{5, 1, 3}, Shape{4, 1}, "t"), (Shape{5, 4, 3}));
  EXPECT_EQ(broadcast_shapes(Shape{0, 1}, Shape{1, 3}, "t"), (Shape{0, 3}));
  EXPECT_THROW(broadcast_shapes(Shape{3, 2}, Shape{4, 2}, "t"), InvalidArgumentError);
  EXPECT_EQ(Shape({2, 3, 4}).num_elements(), 24);
  EXPECT_EQ(Shape().num_elements(), 1);
  EXPECT_EQ(Shape({2, 3}).dim(-1), 3);
  EXPECT_THROW(Shape({2, 3}).dim(2), InvalidArgumentError);
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6, 7, 8, 9}), InvalidArgumentError);
}

// Found by fuzzing (an IDX header, an encoded element): dimensions whose product overflows
// int64 are an error naming the shape, not a wrapped count.
TEST(ShapeTest, AnElementCountPastInt64IsAnError) {
  Shape huge{int64_t{4286054399}, int64_t{4261412864}, 4};
  try {
    huge.num_elements();
    FAIL() << "the count wrapped";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[4286054399, 4261412864, 4]"), std::string::npos)
        << e.what();
  }  // Refused for its size or its count, whichever check comes first; never allocated.
  EXPECT_THROW(Tensor::empty(Shape{int64_t{63829564239168225}, 252645135}, DType::kUInt8), Error);
}

TEST(TensorTest, CreationAndAccess) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.device(), Device::cpu(0));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Tensor::full(Shape{2}, 7, DType::kInt64).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(Tensor::scalar<double>(2.5).item<double>(), 2.5);
  EXPECT_THROW(t.item<float>(), InvalidArgumentError);
  EXPECT_THROW(t.data<double>(), InvalidArgumentError);
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, Shape{2, 2}), InvalidArgumentError);
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_THROW(undefined.shape(), FailedPreconditionError);
}

TEST(TensorTest, ViewsShareTheBuffer) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor r = t.reshape({3, 2});
  Tensor tr = t.t();
  Tensor s = t.slice(1, 1, 3);
  EXPECT_TRUE(r.shares_buffer_with(t));
  EXPECT_TRUE(tr.shares_buffer_with(t));
  EXPECT_TRUE(s.shares_buffer_with(t));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(t.slice(1, 0, 3, 2).to_vector<float>(), (std::vector<float>{1, 3, 4, 6}));
  EXPECT_EQ(t.slice(0, -1, 10).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(t.reshape({-1}).shape(), (Shape{6}));
  EXPECT_THROW(t.reshape({4, -1}), InvalidArgumentError);
  // A non-contiguous tensor reshapes into a copy.
  Tensor copy = tr.reshape({6});
  EXPECT_FALSE(copy.shares_buffer_with(t));
  EXPECT_EQ(copy.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor b = Tensor::from_vector<float>({1, 2, 3}).broadcast_to(Shape{2, 3});
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(b.strides()[0], 0);
}

TEST(TensorTest, AssignCastAndClone) {
  Tensor t = Tensor::zeros(Shape{2, 2});
  t.assign(Tensor::from_vector<double>({1.5, 2, 3, 4}, Shape{2, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5, 2, 3, 4}));
  EXPECT_THROW(t.assign(Tensor::zeros(Shape{3})), InvalidArgumentError);
  Tensor c = t.clone();
  t.assign(Tensor::ones(Shape{2, 2}));
  EXPECT_EQ(c.to_vector<float>()[0], 1.5f);
  EXPECT_EQ(t.cast(DType::kInt32).to_vector<int>(), (std::vector<int>{1, 1, 1, 1}));
  Tensor h = Tensor::from_vector<float>({1.5f, -2.25f}).cast(DType::kBFloat16);
  EXPECT_EQ(h.dtype(), DType::kBFloat16);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(Tensor::from_vector<float>({0.0f, 2.0f}).cast(DType::kBool).to_vector<int>(),
            (std::vector<int>{0, 1}));
  // A transposed view assigned into a contiguous tensor.
  Tensor m = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  Tensor dst = Tensor::zeros(Shape{2, 2});
  dst.assign(m.t());
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  // Assigning a tensor its own transpose reads the old values, not half-written ones.
  m.assign(m.t());
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
}

// A buffer filled on first read: one fill, whichever threads ask at once, and every reader
// sees its values; a view reads through the same buffer.
TEST(TensorTest, ABufferFilledOnFirstReadIsFilledOnceForEveryReader) {
  struct CountingFill : BufferFill {
    mutable std::atomic<int> calls{0};
    void fill(void* data) const override {
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // readers arrive meanwhile
      float* p = static_cast<float*>(data);
      for (int i = 0; i < 6; ++i) p[i] = static_cast<float>(i * i);
    }
  };
  auto fill = std::make_shared<CountingFill>();
  Tensor t = Tensor::empty_deferred(Shape{2, 3}, DType::kFloat32, Device::cpu(0), fill);
  ASSERT_EQ(t.buffer()->pending_fill(), fill.get());
  Tensor row = t.slice(0, 1, 2);
  std::vector<std::vector<float>> seen(4);
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] { seen[r] = (r % 2 == 0 ? t : row).to_vector<float>(); });
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(fill->calls.load(), 1);
  EXPECT_EQ(t.buffer()->pending_fill(), nullptr);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(seen[r], r % 2 == 0 ? std::vector<float>({0, 1, 4, 9, 16, 25})
                                  : std::vector<float>({9, 16, 25}));
  }
}

TEST(TensorTest, ToStringShowsValues) {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4}, Shape{2, 2});
  EXPECT_EQ(t.to_string(),
            "Tensor(shape=[2, 2], dtype=int32, device=cpu:0, values=[[1 2], [3 4]])");
}

TEST(DeviceTest, ParsingAndErrors) {
  EXPECT_EQ(parse_device("cpu:1"), Device::cpu(1));
  EXPECT_EQ(parse_device("/job:worker/replica:0/task:1/device:CPU:0"), Device::cpu(0));
  try {
    parse_device("cpu:99");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("cpu:99"), std::string::npos);
    EXPECT_NE(message.find("available devices: cpu:0"), std::string::npos) << message;
  }
  EXPECT_THROW(parse_device("tpu:0"), InvalidArgumentError);
  EXPECT_THROW(parse_device("cpu"), InvalidArgumentError);
  if (num_gpus() == 0) {
    try {
      parse_device("gpu:0");
      FAIL();
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("available devices"), std::string::npos);
    }
  }
  Tensor on1 = Tensor::ones(Shape{2}, DType::kFloat32, Device::cpu(1));
  EXPECT_EQ(on1.device(), Device::cpu(1));
  Tensor moved = on1.to(Device::cpu(0));
  EXPECT_EQ(moved.device(), Device::cpu(0));
  EXPECT_FALSE(moved.shares_buffer_with(on1));
  EXPECT_THROW(add(on1, Tensor::ones(Shape{2})), InvalidArgumentError);
}

TEST(AllocatorTest, ReusesFreedBlocks) {
  EXPECT_EQ(CachingAllocator::round_size(1), 64u);
  EXPECT_EQ(CachingAllocator::round_size(1000), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1025), 1280u);
  Allocator& a = cpu_allocator();
  { Tensor warm = Tensor::empty(Shape{12345}); }
  AllocatorStats before = a.stats();
  for (int i = 0; i < 10; ++i) {
    Tensor t = Tensor::empty(Shape{12345});
    t.data<float>()[0] = 1;
  }
  AllocatorStats after = a.stats();
  EXPECT_EQ(after.num_system_allocations, before.num_system_allocations);
  EXPECT_EQ(after.num_allocations - before.num_allocations, 10);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use, 12345 * 4);
}

// A tensor larger than the process may use (or whose size overflows) is refused before any
// allocation, naming its shape.
TEST(TensorTest, ATensorThatCannotFitIsResourceExhaustedNamingItsShape) {
  try {
    Tensor::zeros(Shape{1'000'000, 1'000'000, 1'000}, DType::kFloat32);
    FAIL() << "4 EB were allocated";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_NE(std::string(e.what()).find("float32 tensor of shape [1000000, 1000000, 1000] needs"),
              std::string::npos)
        << e.what();
  }
  // int64 overflow of the element count itself.
  EXPECT_THROW(Tensor::empty(Shape{int64_t{1} << 40, int64_t{1} << 40}, DType::kFloat64),
               ResourceExhaustedError);
}

}  // namespace
}  // namespace cadre
