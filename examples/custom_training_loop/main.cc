// Trains a Fashion-MNIST model with the core API alone: a GradientTape per step, the
// gradients applied by an optimizer, test accuracy at the end. This is the custom-training-
// loop style of TensorFlow; the Estimator builds on the same pieces.
//
//   custom_training_loop --model=mlp --steps=2000
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/io/idx.h"
#include "cadre/nn/nn.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/runtime/threading.h"
#include "examples/fashion_mnist/models.h"
#include "examples/program_main.h"

DEFINE_string(model, "mlp", "mlp or cnn");
DEFINE_int32(steps, 2000, "training steps");
DEFINE_int32(batch_size, 128, "batch size");
DEFINE_double(learning_rate, 0.001, "Adam learning rate");
DEFINE_uint64(seed, 42, "seed for initialisation and shuffling");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist", "directory of the IDX .gz files");
DEFINE_int32(threads, 0, "intra-op threads (0: all cores, or CADRE_NUM_THREADS)");
DEFINE_int32(log_every, 200, "steps between progress lines");

namespace {

using namespace cadre;

Tensor scaled_images(const Tensor& images) {
  return cast(images, DType::kFloat32).reshape({images.shape()[0], 784}) / 255.0;
}

// A shuffled pass over [0, n) in batches, reshuffled every epoch.
class BatchOrder {
 public:
  BatchOrder(int64_t n, int64_t batch, uint64_t seed) : n_(n), batch_(batch), generator_(seed, 1) {}
  Tensor next() {
    if (position_ + batch_ > n_) {
      std::vector<float> k =
          random_uniform({n_}, 0, 1, DType::kFloat32, &generator_).to_vector<float>();
      std::vector<int64_t> idx(static_cast<size_t>(n_));
      std::iota(idx.begin(), idx.end(), 0);
      std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
      order_ = Tensor::from_vector(idx);
      position_ = 0;
    }
    Tensor ids = order_.slice(0, position_, position_ + batch_);
    position_ += batch_;
    return ids;
  }

 private:
  int64_t n_, batch_, position_ = INT64_MAX / 2;
  Generator generator_;
  Tensor order_;
};

int run() {
  examples::check_model_name(FLAGS_model);
  examples::check_flag(FLAGS_steps > 0, "steps", FLAGS_steps, "a positive number of steps");
  examples::check_flag(FLAGS_batch_size > 0, "batch_size", FLAGS_batch_size, "a positive count");
  examples::check_flag(FLAGS_threads >= 0, "threads", FLAGS_threads, "0 (all cores) or more");
  examples::check_flag(FLAGS_log_every > 0, "log_every", FLAGS_log_every, "a positive count");
  examples::check_flag(FLAGS_learning_rate > 0, "learning_rate", FLAGS_learning_rate,
                       "a positive number");
  if (FLAGS_threads > 0) set_intra_op_threads(FLAGS_threads);
  io::ImagesAndLabels train = io::read_mnist(FLAGS_data_dir, io::Split::kTrain);
  io::ImagesAndLabels test = io::read_mnist(FLAGS_data_dir, io::Split::kTest);
  Tensor images = scaled_images(train.images);
  Tensor labels = cast(train.labels, DType::kInt64);

  nn::VariableStore store(FLAGS_seed);
  nn::VariableStoreScope scope(store);
  auto optimizer = nn::optimizers::adam(FLAGS_learning_rate);
  BatchOrder order(images.shape()[0], FLAGS_batch_size, FLAGS_seed);

  auto start = std::chrono::steady_clock::now();
  auto window = start;
  for (int step = 1; step <= FLAGS_steps; ++step) {
    Tensor ids = order.next();
    GradientTape tape;
    Tensor logits = examples::model_logits(FLAGS_model, gather(images, ids));
    Tensor loss = nn::sparse_softmax_cross_entropy(gather(labels, ids), logits);
    optimizer->minimize(tape, loss);
    if (step % FLAGS_log_every == 0 || step == FLAGS_steps) {
      auto now = std::chrono::steady_clock::now();
      double seconds = std::chrono::duration<double>(now - window).count();
      int steps = step % FLAGS_log_every == 0 ? FLAGS_log_every : step % FLAGS_log_every;
      double rate = steps / seconds;
      LOG(INFO) << "step " << step << "/" << FLAGS_steps << "  loss " << loss.item<float>() << "  "
                << static_cast<int>(rate) << " steps/s  "
                << static_cast<int>(rate * FLAGS_batch_size / 100) / 10.0 << "k ex/s  ETA "
                << static_cast<int>((FLAGS_steps - step) / rate) << "s";
      window = now;
    }
  }

  nn::Accuracy accuracy;
  nn::Mean test_loss;
  Tensor test_images = scaled_images(test.images);
  Tensor test_labels = cast(test.labels, DType::kInt64);
  NoGradScope no_grad;
  for (int64_t at = 0; at < test_images.shape()[0]; at += 1000) {
    Tensor x = test_images.slice(0, at, at + 1000);
    Tensor y = test_labels.slice(0, at, at + 1000);
    Tensor logits = examples::model_logits(FLAGS_model, x);
    accuracy.update(y, logits);
    nn::LossOptions per_example;
    per_example.reduction = nn::Reduction::kNone;
    test_loss.update(nn::sparse_softmax_cross_entropy(y, logits, per_example));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"task\":\"local\",\"model\":\"%s\",\"global_step\":%d,\"accuracy\":%.4f,"
      "\"loss\":%.4f,\"train_seconds\":%.1f}\n",
      FLAGS_model.c_str(), FLAGS_steps, accuracy.result(), test_loss.result(), seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cadre::examples::program_main(
      argc, argv, "Trains a Fashion-MNIST model with a custom training loop", run);
}
