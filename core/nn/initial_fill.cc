#include "core/nn/initial_fill.h"

#include <glog/logging.h>

#include <algorithm>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/kernels/random.h"

namespace cadre::nn {
namespace {

using kernels::RandomDistribution;

RandomDistribution distribution_of(InitialFill::Kind kind) {
  switch (kind) {
    case InitialFill::Kind::kUniform:
      return RandomDistribution::kUniform;
    case InitialFill::Kind::kNormal:
      return RandomDistribution::kNormal;
    default:
      return RandomDistribution::kTruncatedNormal;
  }
}

// Elements of a draw that share one counter block (core/kernels/random.h): a run that starts
// inside a block needs the whole block.
int64_t elements_per_block(RandomDistribution dist) {
  return dist == RandomDistribution::kUniform ? 4 : dist == RandomDistribution::kNormal ? 2 : 1;
}

// Elements [begin, end) of contiguous `t`, as a flat view of its memory.
Tensor flat_run(const Tensor& t, int64_t begin, int64_t end) {
  Shape shape{end - begin};
  return Tensor::view_of(t.buffer(), shape, shape.contiguous_strides(), t.offset() + begin,
                         t.dtype());
}

// Elements [first, first + out.numel()) of the draw into `out`; `first` starts a block.
void draw_from(const InitialFill& fill, RandomDistribution dist, int64_t first, Tensor& out) {
  PhiloxKey key{fill.key.key,
                fill.key.offset + static_cast<uint64_t>(first / elements_per_block(dist))};
  kernels::random.call(Device::cpu(0), dist, fill.a, fill.b, key, out);
}

}  // namespace

void fill_elements(const InitialFill& fill, int64_t first, Tensor& out, int64_t chunk_bytes) {
  CHECK(out.is_contiguous() && out.device().is_cpu()) << "fill_elements: " << out.to_string(0);
  CHECK_GE(first, 0);
  const int64_t n = out.numel();
  if (fill.kind == InitialFill::Kind::kConstant) {
    const int64_t chunk =
        std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(dtype_size(out.dtype())));
    for (int64_t begin = 0; begin < n; begin += chunk) {
      Tensor run = flat_run(out, begin, std::min(n, begin + chunk));
      run.assign(Tensor::full(run.shape(), fill.a, out.dtype(), Device::cpu(0)));
    }
    return;
  }
  if (out.dtype() != DType::kFloat32 && out.dtype() != DType::kFloat64) {
    throw InvalidArgumentError(
        str_cat("a random initial value of dtype ", out.dtype(), "; expected float32 or float64"));
  }
  const RandomDistribution dist = distribution_of(fill.kind);
  const int64_t per = elements_per_block(dist), lead = first % per;
  int64_t done = 0;
  if (lead != 0 && n > 0) {
    Tensor block = Tensor::empty(Shape{per}, out.dtype(), Device::cpu(0));
    draw_from(fill, dist, first - lead, block);
    done = std::min(n, per - lead);
    flat_run(out, 0, done).assign(flat_run(block, lead, lead + done));
  }
  // The random kinds draw in place: no run is held beside `out`.
  if (done < n) {
    Tensor rest = flat_run(out, done, n);
    draw_from(fill, dist, first + done, rest);
  }
}

}  // namespace cadre::nn
