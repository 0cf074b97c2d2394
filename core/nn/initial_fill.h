// A variable's initial value from a built-in initializer, described instead of built: enough
// for anyone to compute any run of its elements alone, bit for bit as default_variable_creator
// builds the whole value (the random kernels are counter-based: element i of a draw depends
// only on the key, the offset and i). This is what lets each ps task initialise its own rows
// of a table that no process ever holds whole.
#pragma once

#include <cstdint>
#include <optional>

#include "cadre/nn/variable.h"
#include "cadre/random/generator.h"
#include "cadre/tensor/tensor.h"

namespace cadre::nn {

struct InitialFill {
  enum class Kind { kConstant, kUniform, kNormal, kTruncatedNormal };
  Kind kind = Kind::kConstant;
  // kConstant: the value is `a`; kUniform: [a, b); the normals: mean a, standard deviation b.
  double a = 0, b = 0;
  PhiloxKey key;  // the draw's first counter block (unused by kConstant)
};

// How default_variable_creator initialises `spec` under `seed`; nullopt when spec.initializer
// is not one of initializers::* (only running it tells what it makes), or when it would fail
// (a dtype or parameters the draw refuses: the creator's own error is the one to see).
std::optional<InitialFill> initial_fill(const VariableSpec& spec, uint64_t seed);

// Writes elements [first, first + out.numel()) of the row-major value `fill` describes into
// `out` (contiguous, on the host, of the variable's dtype), working through it in runs of
// about `chunk_bytes`: beside `out` it holds at most one run. InvalidArgumentError when a
// random kind meets a dtype other than float32 or float64.
void fill_elements(const InitialFill& fill, int64_t first, Tensor& out, int64_t chunk_bytes);

}  // namespace cadre::nn
