// Random tensors from a Generator (the calling thread's current one when null), on the
// default device. float32 or float64.
#pragma once

#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

Tensor random_uniform(const Shape& shape, double lo = 0, double hi = 1,
                      DType dtype = DType::kFloat32, Generator* generator = nullptr);
Tensor random_normal(const Shape& shape, double mean = 0, double stddev = 1,
                     DType dtype = DType::kFloat32, Generator* generator = nullptr);
// Normal values more than two standard deviations from the mean are drawn again.
Tensor truncated_normal(const Shape& shape, double mean = 0, double stddev = 1,
                        DType dtype = DType::kFloat32, Generator* generator = nullptr);

}  // namespace cadre
