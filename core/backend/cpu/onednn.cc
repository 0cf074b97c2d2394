#include "core/backend/cpu/onednn.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::backend::cpu::onednn {

dnnl::engine& engine() {
  static auto* cpu = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *cpu;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, engine(), t.raw_data());
}

bool eltwise_for(kernels::Activation act, double alpha, dnnl::algorithm& algorithm,
                 float& eltwise_alpha) {
  using kernels::Activation;
  eltwise_alpha = 0.f;
  switch (act) {
    case Activation::kRelu:
      algorithm = dnnl::algorithm::eltwise_relu;
      return true;
    case Activation::kSigmoid:
      algorithm = dnnl::algorithm::eltwise_logistic;
      return true;
    case Activation::kTanh:
      algorithm = dnnl::algorithm::eltwise_tanh;
      return true;
    case Activation::kElu:
      algorithm = dnnl::algorithm::eltwise_elu;
      eltwise_alpha = static_cast<float>(alpha);
      return true;
    default:
      return false;
  }
}

dnnl::primitive_attr attributes(const dnnl::post_ops& post_ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(post_ops);
  return attr;
}

void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args,
             const dnnl::memory::desc& scratchpad, std::string_view what) {
  try {
    Tensor pad;
    size_t bytes = scratchpad.get_size();
    if (bytes > 0) {
      pad = Tensor::empty(Shape{static_cast<int64_t>(bytes)}, DType::kUInt8, Device::cpu(0));
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad, engine(), pad.raw_data()));
    }
    primitive.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    rethrow(e, what);
  }
}

void rethrow(const dnnl::error& e, std::string_view what) {
  throw InternalError(str_cat("oneDNN failed in ", what, ": ", e.what(), " (status ",
                              static_cast<int>(e.status), ")"));
}

}  // namespace cadre::backend::cpu::onednn
