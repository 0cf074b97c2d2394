// Internal to the checkpoint module: TensorFlow's DataType numbers (types.proto) for the
// dtypes Cadre has.
#pragma once

#include <optional>

#include "cadre/tensor/dtype.h"

namespace cadre::checkpoint::internal {

// DT_FLOAT = 1, DT_DOUBLE = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT64 = 9, DT_BOOL = 10,
// DT_BFLOAT16 = 14, DT_HALF = 19.
inline int tf_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 1;
    case DType::kFloat64:
      return 2;
    case DType::kInt32:
      return 3;
    case DType::kUInt8:
      return 4;
    case DType::kInt64:
      return 9;
    case DType::kBool:
      return 10;
    case DType::kBFloat16:
      return 14;
    case DType::kFloat16:
      return 19;
  }
  return 0;
}

inline std::optional<DType> dtype_from_tf(int tf) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kUInt8, DType::kInt64,
                  DType::kBool, DType::kBFloat16, DType::kFloat16}) {
    if (tf_dtype(d) == tf) return d;
  }
  return std::nullopt;
}

}  // namespace cadre::checkpoint::internal
