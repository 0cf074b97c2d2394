// The parameter-server protocol as a ps task's shard serves it (what its gRPC handlers call,
// in process): a shard holding a float variable with Adam's state, an embedding table and
// the global step takes a sequence of requests decoded from the input, each as a stranger
// on the network could send it. Every request must end in a reply or a typed error.
//
// Input: records of [kind (1 byte), length (2 bytes, little-endian), serialized request].
#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "cadre/nn/nn.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"

namespace {

using namespace cadre;

// Requests wait at most this long: a fuzzed timeout must not stall the run.
constexpr double kTimeout = 0.001;

std::unique_ptr<ps::Shard> make_shard() {
  auto shard = std::make_unique<ps::Shard>("ps:0");
  auto create = [&](const std::string& name, const Tensor& value) {
    ps::CreateRequest request;
    request.mutable_variable()->set_name(name);
    request.mutable_variable()->set_dtype(static_cast<int>(value.dtype()));
    for (int64_t d : value.shape()) request.mutable_variable()->add_shape(d);
    request.mutable_variable()->set_trainable(true);
    ps::to_proto(value, request.mutable_initial_value());
    shard->create(request);
  };
  create("dense/kernel", Tensor::full(Shape{4, 3}, 0.5));
  create("emb/embeddings", Tensor::full(Shape{16, 2}, 0.25));
  ps::GlobalStepRequest step;
  step.set_set(true);
  step.set_value(7);
  shard->global_step(step);
  return shard;
}

template <typename Request>
bool parse(const uint8_t* data, size_t size, Request& request) {
  return request.ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<ps::Shard> shard = make_shard();
  size_t at = 0;
  while (at + 3 <= size) {
    uint8_t kind = data[at];
    size_t length = data[at + 1] | (size_t{data[at + 2]} << 8);
    at += 3;
    if (length > size - at) length = size - at;
    const uint8_t* body = data + at;
    at += length;
    try {
      switch (kind % 6) {
        case 0: {
          ps::CreateRequest request;
          if (!parse(body, length, request)) break;
          request.set_timeout_seconds(kTimeout);
          shard->create(request);
          break;
        }
        case 1: {
          ps::PullRequest request;
          if (parse(body, length, request)) shard->pull(request);
          break;
        }
        case 2: {
          ps::PushRequest request;
          if (!parse(body, length, request)) break;
          request.set_timeout_seconds(kTimeout);
          shard->push(request);
          break;
        }
        case 3: {
          ps::GlobalStepRequest request;
          if (!parse(body, length, request)) break;
          request.set_timeout_seconds(kTimeout);
          shard->global_step(request);
          break;
        }
        case 4: {
          ps::ReadRequest request;
          if (parse(body, length, request)) shard->read(request);
          break;
        }
        case 5: {
          ps::InputPositionsRequest request;
          if (parse(body, length, request)) shard->input_positions(request);
          break;
        }
      }
    } catch (const Error&) {
    }
  }
  return 0;
}
