// The oneDNN adapter: the CPU engine, a stream per thread, memory descriptors for our
// tensors, scratchpads from Cadre's allocator, and translation of oneDNN errors.
#pragma once

#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <unordered_map>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"
#include "core/kernels/elementwise.h"

namespace cadre::backend::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();  // the calling thread's

// A memory object viewing t's elements with `md`'s layout (no copy).
dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t);

// The eltwise algorithm and alpha for an activation fused as a post-op; false when oneDNN
// has no equivalent.
bool eltwise_for(kernels::Activation act, double alpha, dnnl::algorithm& algorithm,
                 float& eltwise_alpha);

// Executes `primitive` with `args` plus a scratchpad of `scratchpad_bytes` from Cadre's
// allocator, and waits. Translates oneDNN errors into InternalError naming `what`.
void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args,
             const dnnl::memory::desc& scratchpad, std::string_view what);

// Primitive attributes with a user-provided scratchpad (so that concurrent replicas never
// share oneDNN's internal one) and the given post-ops.
dnnl::primitive_attr attributes(const dnnl::post_ops& post_ops = dnnl::post_ops());

[[noreturn]] void rethrow(const dnnl::error& e, std::string_view what);

}  // namespace cadre::backend::cpu::onednn
