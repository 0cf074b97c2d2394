// How long work queued on a CUDA stream takes, timed between events (for choosing between
// two ways of computing the same thing, as autotuning does).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <optional>
#include <string>

namespace cadre::backend::cuda {

// Milliseconds that `run` takes on `stream`: the quickest of three runs after a first.
// Throws what `run` or the CUDA runtime throws.
float time_of(cudaStream_t stream, const std::function<void()>& run);
// The milliseconds of time_of, or none where `run` ran out of GPU memory
// (ResourceExhaustedError).
std::optional<float> time_if_it_fits(cudaStream_t stream, const std::function<void()>& run);
// "<ms> ms", or "out of memory" for none.
std::string milliseconds(const std::optional<float>& ms);

}  // namespace cadre::backend::cuda
