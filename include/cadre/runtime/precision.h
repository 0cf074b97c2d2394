// The arithmetic that float32 matrix products and convolutions may use on a GPU, a process
// setting like PyTorch's torch.set_float32_matmul_precision. The default is full float32;
// TF32 and bfloat16 run on tensor cores at several times the speed with a shorter
// mantissa (10 and 7 bits) while inputs, outputs, accumulation and the variables (the
// "master weights") stay float32. CPU kernels always compute in float32.
#pragma once

#include <string_view>

namespace cadre {

enum class Float32Precision {
  kFloat32,   // IEEE float32 products (default)
  kTF32,      // inputs rounded to TensorFloat-32 inside the product
  kBFloat16,  // inputs rounded to bfloat16 inside the product (float32 accumulation)
};

// Thread-safe; takes effect for products started after the call.
void set_float32_precision(Float32Precision precision);
Float32Precision float32_precision();

// "float32", "tf32" or "bf16" (also "bfloat16"); throws InvalidArgumentError listing them.
Float32Precision parse_float32_precision(std::string_view name);
std::string_view float32_precision_name(Float32Precision precision);

}  // namespace cadre
