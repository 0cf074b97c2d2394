// Small data sets for the Keras tests: a synthetic classification problem that a few
// steps learn, and a slice of Fashion-MNIST when the Debian package is installed.
#pragma once

#include <filesystem>

#include "cadre/cadre.h"

namespace cadre::keras::testing {

inline constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
inline bool have_fashion_mnist() { return std::filesystem::exists(kFashionMnist); }

// 512 examples of 8 features; the class (0-3) is the largest of 4 fixed projections.
inline io::Dataset blobs(int64_t batch = 32, uint64_t seed = 3) {
  Generator generator(seed, 0);
  Tensor x = random_normal({512, 8}, 0, 1, DType::kFloat32, &generator);
  Tensor w = random_normal({8, 4}, 0, 1, DType::kFloat32, &generator);
  Tensor y = argmax(matmul(x, w), 1);
  return io::Dataset::from_tensor_slices(io::Features{{"x", x}}, y).batch(batch);
}

}  // namespace cadre::keras::testing
