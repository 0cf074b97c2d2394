#include "core/backend/cuda/stream_timing.h"

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/backend/cuda/cuda_error.h"
#include "core/base/strings.h"

namespace cadre::backend::cuda {

float time_of(cudaStream_t stream, const std::function<void()>& run) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  float best = 0;
  try {
    run();
    for (int i = 0; i < 3; ++i) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      run();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      best = i == 0 ? ms : std::min(best, ms);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

std::optional<float> time_if_it_fits(cudaStream_t stream, const std::function<void()>& run) {
  try {
    return time_of(stream, run);
  } catch (const ResourceExhaustedError&) {
    return std::nullopt;
  }
}

std::string milliseconds(const std::optional<float>& ms) {
  return ms ? str_cat(*ms, " ms") : std::string("out of memory");
}

}  // namespace cadre::backend::cuda
