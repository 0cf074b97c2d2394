// Requests of the parameter-server protocol as the tests of the shard and of its service
// write them.
#pragma once

#include <string>

#include "cadre/nn/nn.h"
#include "cadre/tensor/tensor.h"
#include "strategies/ps/optimizer_proto.h"
#include "strategies/ps/ps.pb.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::testing {

// A float32 trainable variable `name` of `shape`: the chief's, with `value`, or (null) a
// worker's, which waits up to `timeout` for the chief and wants the value back.
inline ps::CreateRequest create_request(const std::string& name, const Tensor* value, Shape shape,
                                        double timeout = 10) {
  ps::CreateRequest request;
  request.mutable_variable()->set_name(name);
  request.mutable_variable()->set_dtype(static_cast<int>(DType::kFloat32));
  for (int64_t d : shape) request.mutable_variable()->add_shape(d);
  request.mutable_variable()->set_trainable(true);
  if (value) ps::to_proto(*value, request.mutable_initial_value());
  request.set_want_value(!value);
  request.set_timeout_seconds(timeout);
  return request;
}

inline ps::PushRequest push_request(const nn::Optimizer& optimizer, bool from_chief,
                                    double timeout = 10) {
  ps::PushRequest request;
  ps::to_proto(optimizer.config(), request.mutable_optimizer());
  request.set_from_chief(from_chief);
  request.set_timeout_seconds(timeout);
  return request;
}

inline void add_dense(ps::PushRequest& request, const std::string& name, const Tensor& gradient) {
  ps::PushItem* item = request.add_items();
  item->set_name(name);
  ps::to_proto(gradient, item->mutable_dense());
}

// The chief's optimizer state for `name`: its slots (zeros, as fresh) and step counter 0.
inline void add_fresh_state(ps::PushRequest& request, const nn::Optimizer& optimizer,
                            const std::string& name, const Tensor& value) {
  nn::Variable stand_in(nn::VariableSpec{.name = name, .shape = value.shape()}, value);
  for (const nn::VariableSpec& slot : optimizer.slot_variable_specs(stand_in)) {
    ps::NamedTensor* t = request.add_slots();
    t->set_name(slot.name);
    t->set_slot_of(name);
    ps::to_proto(Tensor::full(value.shape(), slot.name.ends_with("accumulator") ? 0.1 : 0.0),
                 t->mutable_value());
  }
  request.add_slots_for(name);
  request.set_has_initial_iterations(true);
  request.set_initial_iterations(0);
}

inline ps::PullRequest pull_request(const std::string& name) {
  ps::PullRequest request;
  request.add_items()->set_name(name);
  return request;
}

inline ps::GlobalStepRequest set_global_step(int64_t step) {
  ps::GlobalStepRequest request;
  request.set_set(true);
  request.set_value(step);
  return request;
}

}  // namespace cadre::testing
