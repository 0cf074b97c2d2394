#include "strategies/ps/push_parts.h"

#include "core/runtime/in_parallel.h"

namespace cadre::ps {
namespace {

// A field's tag and length prefix, at most.
constexpr int64_t kPartFraming = 16;

template <typename Message>
int64_t cost(const Message& m) {
  return static_cast<int64_t>(m.ByteSizeLong()) + kPartFraming;
}

// Parts being filled: each starts as `common` and takes items while they fit.
class Parts {
 public:
  Parts(PushRequest common, int64_t budget)
      : common_(std::move(common)), base_(cost(common_)), budget_(budget) {}

  // The part to add `bytes` to: the last one while it has room (or holds nothing yet), or
  // a new one.
  PushRequest& room(int64_t bytes) {
    if (parts_.empty() || closed_ || (used_ > base_ && used_ + bytes > budget_)) {
      parts_.push_back(common_);
      used_ = base_;
      closed_ = false;
    }
    used_ += bytes;
    return parts_.back();
  }
  // What comes next goes in a new part.
  void close() { closed_ = true; }
  std::vector<PushRequest> take() { return std::move(parts_); }

 private:
  PushRequest common_;
  int64_t base_, budget_;
  std::vector<PushRequest> parts_;
  int64_t used_ = 0;
  bool closed_ = false;
};

// The parts of one push to one ps task, sent in order.
struct PartsToTask {
  std::vector<PushRequest> parts;
  size_t next = 0;
  int64_t step = 0;  // the optimizer step the task counted for this push
  PushResponse first;

  void send_next(PsClient& client, bool state_only) {
    PushRequest& part = parts[next++];
    if (state_only) {
      part.clear_items();
      part.clear_deltas();
      if (!carries_anything(part)) return;
    }
    if (step > 0 && part.items_size() > 0) part.set_step(step);
    PushResponse response = client.push(part);
    if (step == 0) step = response.step();
    if (next == 1) first = std::move(response);
  }
  void send_rest(PsClient& client, bool state_only) {
    while (next < parts.size()) send_next(client, state_only);
  }
};

}  // namespace

bool carries_anything(const PushRequest& r) {
  return r.items_size() > 0 || r.deltas_size() > 0 || r.slots_size() > 0 ||
         r.slots_for_size() > 0 || r.has_initial_iterations();
}

std::vector<PushRequest> split_push(PushRequest request, int64_t budget) {
  std::vector<PushRequest> out;
  if (cost(request) <= budget) {
    out.push_back(std::move(request));
    return out;
  }
  PushRequest common;
  *common.mutable_optimizer() = request.optimizer();
  common.set_pulled_step(request.pulled_step());
  common.set_from_chief(request.from_chief());
  common.set_timeout_seconds(request.timeout_seconds());
  Parts parts(std::move(common), budget);
  // A first part, whatever follows, with room for the input position it carries.
  parts.room(static_cast<int64_t>(request.input_position().size()) + kPartFraming);
  for (NamedTensor& slot : *request.mutable_slots()) {
    parts.room(cost(slot)).mutable_slots()->Add(std::move(slot));
  }
  if (request.slots_size() > 0 || request.slots_for_size() > 0 ||
      request.has_initial_iterations()) {
    // With the last slot: the variables' state is complete once this part lands.
    PushRequest& last = parts.room(0);
    last.mutable_slots_for()->Swap(request.mutable_slots_for());
    last.set_initial_iterations(request.initial_iterations());
    last.set_has_initial_iterations(request.has_initial_iterations());
    parts.close();
  }
  for (PushItem& item : *request.mutable_items()) {
    parts.room(cost(item)).mutable_items()->Add(std::move(item));
  }
  for (NamedTensor& delta : *request.mutable_deltas()) {
    parts.room(cost(delta)).mutable_deltas()->Add(std::move(delta));
  }
  out = parts.take();
  PushRequest& first = out.front();
  first.set_increment_global_step(request.increment_global_step());
  first.set_max_staleness(request.max_staleness());
  first.set_unit(request.unit());
  first.set_unit_steps(request.unit_steps());
  first.set_unit_generation(request.unit_generation());
  first.set_input_pipeline(request.input_pipeline());
  first.set_has_input_position(request.has_input_position());
  first.set_input_position(std::move(*request.mutable_input_position()));
  return out;
}

PushResponse send_push(const std::vector<std::unique_ptr<PsClient>>& clients,
                       std::vector<PushRequest> requests, const std::vector<int>& which,
                       int64_t budget, bool first_decides) {
  std::vector<PartsToTask> to(clients.size());
  for (int p : which) {
    to[static_cast<size_t>(p)].parts =
        split_push(std::move(requests[static_cast<size_t>(p)]), budget);
  }
  bool state_only = false;
  if (first_decides) {
    to[0].send_next(*clients[0], false);
    state_only = to[0].first.dropped() || to[0].first.unit_closed();
  }
  in_parallel(which, [&](int p) {
    to[static_cast<size_t>(p)].send_rest(*clients[static_cast<size_t>(p)], state_only);
  });
  return to[0].first;
}

}  // namespace cadre::ps
