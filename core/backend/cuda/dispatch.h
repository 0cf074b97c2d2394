// dtype -> element type dispatch for the CUDA kernels, with the 16-bit float types as the
// portable storage structs the kernels convert with (core/backend/portable/).
#pragma once

#include "cadre/tensor/dtype.h"
#include "cadre/tensor/tensor.h"
#include "core/backend/portable/scalar_math.h"

namespace cadre::backend::cuda {

// fn.template operator()<T>() for every dtype, bfloat16 and float16 included.
template <typename Fn>
decltype(auto) visit_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBFloat16:
      return fn.template operator()<portable::Bf16>();
    case DType::kFloat16:
      return fn.template operator()<portable::Half>();
    default:
      return visit_dtype(dtype, "cast", fn);
  }
}

// fn(const I* indices) for int32 or int64 indices.
template <typename Fn>
void visit_index(const Tensor& indices, Fn&& fn) {
  if (indices.dtype() == DType::kInt64) {
    fn(static_cast<const int64_t*>(indices.raw_data()));
  } else {
    fn(static_cast<const int32_t*>(indices.raw_data()));
  }
}

}  // namespace cadre::backend::cuda
