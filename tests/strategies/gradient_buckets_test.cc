// GradientBuckets with a collective that records what it is asked to sum: buckets go out in
// reverse order of the variables, then in the order the gradients came in, each once all
// its gradients are in, while later gradients are still to come (overlap), and the sums
// come back in place.
#include "strategies/gradient_buckets.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "strategies/collectives/nccl/collective.h"

namespace cadre {
namespace {

// Two processes' sum, as if the other process held the same values: doubles them, and
// keeps a copy of every buffer it was given.
class RecordingCollective : public ProcessCollective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "recording"; }
  void sum(float* data, size_t count) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_) throw UnavailableError("the peer is gone");
    calls_.emplace_back(data, data + count);
    for (size_t i = 0; i < count; ++i) data[i] *= 2;
    called_.notify_all();
  }
  void sum(double* data, size_t count) override {
    std::vector<float> copy(data, data + count);
    sum(copy.data(), count);
    for (size_t i = 0; i < count; ++i) data[i] = copy[i];
  }
  // Rank 0's broadcast: its bytes stay as they are.
  void broadcast(void*, size_t, int root) override {
    std::lock_guard<std::mutex> lock(mutex_);
    EXPECT_EQ(root, 0);
    ++broadcasts_;
  }
  int broadcasts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return broadcasts_;
  }

  // Waits (up to 5 s) until `n` buffers have been summed.
  bool wait_for_calls(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return called_.wait_for(lock, std::chrono::seconds(5), [&] { return calls_.size() >= n; });
  }
  std::vector<std::vector<float>> calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  void fail() {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_ = true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable called_;
  std::vector<std::vector<float>> calls_;
  bool fail_ = false;
  int broadcasts_ = 0;
};

// A GPU collective's queue, on the host: queue_sum() notes the bucket, and the sum (two
// processes' values alike: doubled) lands only at wait_queued(), as on a device stream.
class QueueingCollective : public GpuCollective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "queue"; }
  void sum(float*, size_t) override { ADD_FAILURE() << "summed at once, not queued"; }
  void sum(double*, size_t) override { ADD_FAILURE() << "summed at once, not queued"; }
  void sum(const Tensor&) override { ADD_FAILURE() << "summed at once, not queued"; }
  void broadcast(void*, size_t, int) override { ADD_FAILURE() << "the GPU carried the order"; }
  void abort(const std::string&) override {}
  void queue_sum(const Tensor& tensor) override {
    if (fail_queue_) throw AbortedError("NCCL rank 0 of 2: the communicator was aborted");
    pending_.push_back(tensor);
    queued_.push_back(tensor.to_vector<float>());
  }
  void wait_queued() override {
    if (pending_.empty()) return;
    if (fail_wait_) {
      pending_.clear();
      throw DeadlineExceededError("NCCL rank 0 of 2: the queued sums did not finish");
    }
    for (Tensor& t : pending_) {
      float* data = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) data[i] *= 2;
    }
    pending_.clear();
    ++waits_;
  }
  const std::vector<std::vector<float>>& queued() const { return queued_; }
  int waits() const { return waits_; }  // that found sums queued
  void fail_queue() { fail_queue_ = true; }
  void fail_wait() { fail_wait_ = true; }

 private:
  bool fail_queue_ = false, fail_wait_ = false;
  std::vector<Tensor> pending_;
  std::vector<std::vector<float>> queued_;
  int waits_ = 0;
};

Tensor filled(int64_t n, float value) { return Tensor::full(Shape{n}, value); }

TEST(GradientBucketsTest, BucketsGoOutInReverseOrderAsSoonAsTheyAreFull) {
  RecordingCollective collective;
  // 16-byte buckets: sources 3 and 2 (2 floats each) make the first, 1 and 0 the second.
  GradientBuckets buckets(collective, {.bucket_bytes = 16, .first_bucket_bytes = 16});
  std::vector<Tensor> sources{filled(2, 0), filled(2, 0), filled(2, 0), filled(2, 0)};
  buckets.begin(sources, {7.0}, {});
  buckets.ready(3, filled(2, 3));
  buckets.ready(2, filled(2, 2));
  // The first bucket is summed before the backward pass has produced the others.
  ASSERT_TRUE(collective.wait_for_calls(1));
  EXPECT_EQ(collective.calls()[0], (std::vector<float>{3, 3, 2, 2}));
  buckets.ready(1, filled(2, 1));
  buckets.ready(0, Gradient());  // unconnected
  std::vector<double> extras;
  std::vector<Gradient> sums = buckets.finish(extras);
  ASSERT_EQ(collective.calls().size(), 2u);
  // The last bucket carries the extras after its gradients; a missing gradient adds zeros.
  EXPECT_EQ(collective.calls()[1], (std::vector<float>{1, 1, 0, 0, 7}));
  ASSERT_EQ(sums.size(), 4u);
  EXPECT_FALSE(sums[0].defined());
  EXPECT_EQ(sums[1].dense().to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(sums[3].dense().to_vector<float>(), (std::vector<float>{6, 6}));
  EXPECT_EQ(extras, (std::vector<double>{14.0}));
}

// Source 2's gradient comes with source 0's (as a fused layer's bias comes with its
// kernel), so the first step's first bucket {3, 2} waits for the end of the backward pass;
// from the second step the buckets follow the order the gradients came in, {3, 1} then
// {2, 0}, agreed once through worker 0's broadcast, and the first goes out early again.
TEST(GradientBucketsTest, BucketsFollowTheOrderTheGradientsCameInFromTheSecondStep) {
  RecordingCollective collective;
  GradientBuckets buckets(collective, {.bucket_bytes = 16, .first_bucket_bytes = 16});
  std::vector<Tensor> sources{filled(2, 0), filled(2, 0), filled(2, 0), filled(2, 0)};
  size_t calls = 0;
  for (int step = 0; step < 3; ++step) {
    buckets.begin(sources, {}, {});
    EXPECT_EQ(collective.broadcasts(), step == 0 ? 0 : 1) << "step " << step;
    buckets.ready(3, filled(2, 3));
    buckets.ready(1, filled(2, 1));
    if (step == 0) {
      EXPECT_EQ(collective.calls().size(), calls);  // {3, 2} still waits for 2
    } else {
      ASSERT_TRUE(collective.wait_for_calls(calls + 1)) << "step " << step;
      EXPECT_EQ(collective.calls()[calls], (std::vector<float>{3, 3, 1, 1})) << "step " << step;
    }
    buckets.ready(2, filled(2, 2));
    buckets.ready(0, filled(2, 0.5f));
    std::vector<double> extras;
    std::vector<Gradient> sums = buckets.finish(extras);
    calls += 2;
    ASSERT_EQ(collective.calls().size(), calls);
    for (size_t i = 0; i < 4; ++i) {
      float expected = i == 0 ? 1.0f : 2.0f * static_cast<float>(i);
      EXPECT_EQ(sums[i].dense().to_vector<float>(), (std::vector<float>{expected, expected}))
          << "step " << step << ", source " << i;
    }
  }
}

TEST(GradientBucketsTest, WithoutOverlapNothingGoesOutBeforeFinish) {
  RecordingCollective collective;
  GradientBuckets buckets(collective,
                          {.bucket_bytes = 16, .first_bucket_bytes = 16, .overlap = false});
  std::vector<Tensor> sources{filled(2, 0), filled(2, 0), filled(2, 0), filled(2, 0)};
  for (int step = 0; step < 2; ++step) {
    buckets.begin(sources, {}, {});
    for (size_t i = 4; i-- > 0;) buckets.ready(i, filled(2, static_cast<float>(i + step)));
    EXPECT_EQ(collective.calls().size(), 2u * step);
    std::vector<double> extras;
    std::vector<Gradient> sums = buckets.finish(extras);
    EXPECT_EQ(collective.calls().size(), 2u * (step + 1));
    EXPECT_EQ(sums[2].dense().to_vector<float>(),
              (std::vector<float>{4.0f + 2 * step, 4.0f + 2 * step}));
  }
}

// A gradient left unbuilt by its op (GradientTape::announce), built by rows on request;
// with `overlap`, the k-th request first waits until the collective has summed k buffers.
class RowsOnRequest final : public autodiff::DeferredGradient {
 public:
  RowsOnRequest(Tensor value, RecordingCollective& collective, bool overlap)
      : value_(std::move(value)), collective_(collective), overlap_(overlap) {}
  Tensor materialize() const override {
    ++wholes;
    return value_;
  }
  Tensor rows(int64_t begin, int64_t end) const override {
    requests.emplace_back(begin, end);
    // The small gradient's bucket and the earlier pieces are summed while this one is built.
    if (overlap_) {
      EXPECT_TRUE(collective_.wait_for_calls(requests.size())) << begin;
    }
    return contiguous(value_.slice(0, begin, end));
  }
  Shape shape() const override { return value_.shape(); }
  DType dtype() const override { return value_.dtype(); }
  Device device() const override { return value_.device(); }

  mutable std::vector<std::pair<int64_t, int64_t>> requests;
  mutable int wholes = 0;

 private:
  Tensor value_;
  RecordingCollective& collective_;
  bool overlap_;
};

// A [7, 2] gradient (56 bytes) above piece_bytes = 20 goes in 3 pieces of 3, 3 and 1 rows,
// a bucket each after the small gradient's; an unbuilt one is built by those rows, each
// summed while the next is built; a built one is cut into the same pieces; the sums and the
// calls are the same with overlap off.
TEST(GradientBucketsTest, ALargeGradientGoesInPiecesEachSummedWhileTheNextIsBuilt) {
  std::vector<float> values;
  for (int k = 0; k < 14; ++k) values.push_back(static_cast<float>(k));
  Tensor large = Tensor::from_vector<float>(values, Shape{7, 2});
  std::vector<std::vector<float>> first_calls;
  for (int form = 0; form < 3; ++form) {  // unbuilt, built, unbuilt without overlap
    RecordingCollective collective;
    GradientBuckets buckets(
        collective,
        {.bucket_bytes = 64, .first_bucket_bytes = 64, .piece_bytes = 20, .overlap = form != 2});
    std::vector<Tensor> sources{Tensor::zeros(Shape{7, 2}), filled(2, 0)};
    buckets.begin(sources, {7.0}, {});
    buckets.ready(1, filled(2, 5));
    auto unbuilt = std::make_shared<RowsOnRequest>(large, collective, form != 2);
    if (form == 1) {
      buckets.ready(0, large);
    } else {
      buckets.ready(0, Gradient(std::shared_ptr<const autodiff::DeferredGradient>(unbuilt)));
      EXPECT_EQ(unbuilt->requests,
                (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 7}}));
      EXPECT_EQ(unbuilt->wholes, 0);
    }
    std::vector<double> extras;
    std::vector<Gradient> sums = buckets.finish(extras);
    std::vector<std::vector<float>> calls = collective.calls();
    ASSERT_EQ(calls.size(), 4u) << form;
    EXPECT_EQ(calls[0], (std::vector<float>{5, 5}));
    EXPECT_EQ(calls[1], (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(calls[3], (std::vector<float>{12, 13, 7}));  // the last piece, then the extras
    std::vector<float> doubled;
    for (float v : values) doubled.push_back(2 * v);
    EXPECT_EQ(sums[0].dense().shape(), (Shape{7, 2}));
    EXPECT_EQ(sums[0].dense().to_vector<float>(), doubled) << form;
    EXPECT_EQ(sums[1].dense().to_vector<float>(), (std::vector<float>{10, 10}));
    EXPECT_EQ(extras, (std::vector<double>{14.0}));
    if (form == 0) {
      first_calls = calls;
    } else {
      EXPECT_EQ(calls, first_calls) << form;
    }
  }
}

// On a GPU no thread sums: a full bucket is queued on the communicator's stream by the
// ready() that filled it, the last by finish(), which waits for the queue before handing
// out the sums; the host collective agrees on the order.
TEST(GradientBucketsTest, OnAGpuFullBucketsAreQueuedAtOnceAndFinishWaitsForThem) {
  QueueingCollective gpus;
  RecordingCollective host;
  // A bucket for each source (2 floats), the extras in the last.
  GradientBuckets buckets(gpus, host, {.bucket_bytes = 8, .first_bucket_bytes = 8});
  std::vector<Tensor> sources{filled(2, 0), filled(2, 0), filled(2, 0)};
  for (int step = 0; step < 2; ++step) {
    const size_t before = gpus.queued().size();
    buckets.begin(sources, {7.0}, {});
    buckets.ready(2, filled(2, 3));
    ASSERT_EQ(gpus.queued().size(), before + 1) << "step " << step;
    EXPECT_EQ(gpus.queued()[before], (std::vector<float>{3, 3}));
    buckets.ready(1, filled(2, 2));
    EXPECT_EQ(gpus.queued().size(), before + 2) << "step " << step;
    buckets.ready(0, filled(2, 1));
    EXPECT_EQ(gpus.queued().size(), before + 2) << "the last bucket goes at finish()";
    std::vector<double> extras;
    std::vector<Gradient> sums = buckets.finish(extras);
    ASSERT_EQ(gpus.queued().size(), before + 3);
    EXPECT_EQ(gpus.queued()[before + 2], (std::vector<float>{1, 1, 7}));
    EXPECT_EQ(gpus.waits(), step + 1) << "finish() waits for the queue";
    for (size_t i = 0; i < 3; ++i) {
      float expected = 2.0f * static_cast<float>(i + 1);
      EXPECT_EQ(sums[i].dense().to_vector<float>(), (std::vector<float>{expected, expected}))
          << "step " << step << ", source " << i;
    }
    EXPECT_EQ(extras, (std::vector<double>{14.0}));
  }
  EXPECT_EQ(host.broadcasts(), 1);
  EXPECT_TRUE(host.calls().empty());
}

// On a GPU a sum that cannot be queued fails the ready() that filled its bucket (the
// backward pass stops there), and one that fails in flight fails finish().
TEST(GradientBucketsTest, OnAGpuAQueueingErrorFailsTheStepWhereItHappens) {
  QueueingCollective gpus;
  RecordingCollective host;
  GradientBuckets buckets(gpus, host, {.bucket_bytes = 8, .first_bucket_bytes = 8});
  std::vector<Tensor> sources{filled(2, 0), filled(2, 0)};
  buckets.begin(sources, {}, {});
  buckets.ready(1, filled(2, 1));
  buckets.ready(0, filled(2, 1));
  gpus.fail_wait();
  std::vector<double> extras;
  EXPECT_THROW(buckets.finish(extras), DeadlineExceededError);
  gpus.fail_queue();
  buckets.begin(sources, {}, {});
  EXPECT_THROW(buckets.ready(1, filled(2, 1)), AbortedError);
}

TEST(GradientBucketsTest, ACollectiveErrorReachesFinish) {
  RecordingCollective collective;
  GradientBuckets buckets(collective, {});
  collective.fail();
  buckets.begin({filled(3, 0)}, {}, {});
  buckets.ready(0, filled(3, 1));
  std::vector<double> extras;
  EXPECT_THROW(buckets.finish(extras), UnavailableError);
}

}  // namespace
}  // namespace cadre
