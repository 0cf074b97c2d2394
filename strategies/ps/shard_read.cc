// Shard::read: the values a ps task holds, by name, or a listing of what it holds (the
// chief gathers the logical variables, tools inspect a task).
#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "strategies/ps/shard.h"
#include "strategies/ps/tensor_data.h"

namespace cadre::ps {
namespace {

constexpr char kGlobalStepName[] = "global_step";
constexpr char kIterationsSuffix[] = "/iterations";

}  // namespace

ReadResponse Shard::read(const ReadRequest& request) {
  ReadResponse response;
  if (request.names().empty()) {
    list(&response);
    return response;
  }
  for (const std::string& name : request.names()) read_one(name, response.add_variables());
  return response;
}

void Shard::list(ReadResponse* response) {
  MutexLock lock(mutex_);
  auto add = [&](const std::string& name, DType dtype, const Shape& shape,
                 const std::string& slot_of) {
    NamedTensor* t = response->add_variables();
    t->set_name(name);
    t->set_slot_of(slot_of);
    t->mutable_value()->set_dtype(static_cast<int>(dtype));
    for (int64_t d : shape) t->mutable_value()->add_shape(d);
  };
  for (const auto& [name, entry] : entries_) {
    if (entry->variable) add(name, entry->dtype, entry->shape, "");
  }
  for (nn::Variable* slot : slots_.variables()) {
    add(slot->name(), slot->dtype(), slot->shape(), slot->spec().slot_of);
  }
  for (const auto& [name, state] : optimizers_.by_name()) {
    add(name + kIterationsSuffix, DType::kInt64, Shape{}, "");
  }
  if (global_step_) add(kGlobalStepName, DType::kInt64, Shape{}, "");
}

void Shard::read_one(const std::string& name, NamedTensor* out) {
  out->set_name(name);
  MutexLock lock(mutex_);
  if (name == kGlobalStepName && global_step_) {
    to_proto(Tensor::scalar<int64_t>(*global_step_), out->mutable_value());
    return;
  }
  if (name.ends_with(kIterationsSuffix)) {
    std::string optimizer =
        name.substr(0, name.size() - std::string_view(kIterationsSuffix).size());
    if (OptimizerState* state = optimizers_.find(optimizer)) {
      to_proto(Tensor::scalar<int64_t>(state->iterations), out->mutable_value());
      return;
    }
  }
  if (auto it = entries_.find(name); it != entries_.end() && it->second->variable) {
    Entry& entry = *it->second;
    lock.unlock();
    std::lock_guard<std::mutex> hold(entry.mutex);
    to_proto(entry.variable->tensor(), out->mutable_value());
    return;
  }
  if (nn::Variable* slot = slots_.find(name)) {
    Entry& owner = *entries_.at(slot->spec().slot_of);
    lock.unlock();
    std::lock_guard<std::mutex> hold(owner.mutex);
    out->set_slot_of(slot->spec().slot_of);
    to_proto(slot->tensor(), out->mutable_value());
    return;
  }
  throw NotFoundError(str_cat(task_, " holds nothing named '", name, "'"));
}

}  // namespace cadre::ps
