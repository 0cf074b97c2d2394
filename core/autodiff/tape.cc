#include "cadre/autodiff/tape.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "cadre/base/errors.h"
#include "cadre/runtime/profiler.h"
#include "core/base/strings.h"

namespace cadre {
namespace {

thread_local std::vector<GradientTape*> active_tapes;
thread_local int pause_depth = 0;

// "<op>_grad", the profiler's name for an op's gradient function (interned once per op).
std::string_view grad_event_name(const char* op) {
  thread_local std::unordered_map<const char*, std::string_view> names;
  auto [it, inserted] = names.try_emplace(op);
  if (inserted) it->second = profiler::intern(std::string(op) + "_grad");
  return it->second;
}

// A tensor like `x` (shape, dtype, device) filled with `value`: ones_like and zeros_like are
// ops, a layer above the tape.
Tensor filled_like(const Tensor& x, double value) {
  return Tensor::full(x.shape(), value, x.dtype(), x.device());
}

}  // namespace

GradientTape::GradientTape(bool persistent) : persistent_(persistent) {
  active_tapes.push_back(this);
}

GradientTape::~GradientTape() {
  auto it = std::find(active_tapes.begin(), active_tapes.end(), this);
  if (it != active_tapes.end()) active_tapes.erase(it);
}

void GradientTape::watch(const Tensor& tensor) { tracked_.insert(tensor.id()); }

void GradientTape::add_record(autodiff::Record record) {
  for (uint64_t id : record.output_ids) tracked_.insert(id);
  records_.push_back(std::move(record));
}

Gradient GradientTape::gradient(const Tensor& target, const Tensor& source,
                                UnconnectedGradients unconnected) {
  return gradient(target, std::vector<Tensor>{source}, unconnected)[0];
}

std::vector<Gradient> GradientTape::gradient(const Tensor& target,
                                             const std::vector<Tensor>& sources,
                                             UnconnectedGradients unconnected,
                                             const Tensor& output_gradient,
                                             const GradientReady& ready) {
  std::vector<Gradient> results;
  run(target, sources, unconnected, output_gradient, ready, &results);
  return results;
}

void GradientTape::announce(const Tensor& target, const std::vector<Tensor>& sources,
                            const GradientReady& ready) {
  run(target, sources, UnconnectedGradients::kNone, Tensor(), ready, nullptr);
}

namespace {

// One backward sweep over a tape's records, from the target to the sources.
class BackwardSweep {
 public:
  BackwardSweep(std::vector<autodiff::Record>& records, const std::vector<Tensor>& sources,
                UnconnectedGradients unconnected, const GradientTape::GradientReady& ready,
                std::vector<Gradient>* results, bool persistent)
      : records_(records),
        sources_(sources),
        unconnected_(unconnected),
        ready_(ready),
        results_(results),
        persistent_(persistent),
        active_(records.size(), 0),
        announced_(sources.size(), 0) {}

  void run(const Tensor& target, const Tensor& output_gradient) {
    mark_active();
    if (ready_) plan_announcements();
    grads_[target.id()] = output_gradient.defined() ? output_gradient : filled_like(target, 1);
    for (size_t r = records_.size(); r-- > 0;) {
      if (active_[r]) step(r);
    }
    for (size_t i = 0; i < sources_.size(); ++i) {
      if (results_ == nullptr && announced_[i]) continue;
      Gradient gradient = result_for(i);
      if (ready_ && !announced_[i]) ready_(i, gradient);
      if (results_ != nullptr) results_->push_back(std::move(gradient));
    }
  }

 private:
  // Forward sweep: which records lie on a path from a source.
  void mark_active() {
    for (const Tensor& s : sources_) reach_.insert(s.id());
    for (size_t r = 0; r < records_.size(); ++r) {
      const auto& rec = records_[r];
      bool hit = std::any_of(rec.input_ids.begin(), rec.input_ids.end(),
                             [&](uint64_t id) { return reach_.count(id) != 0; });
      if (!hit) continue;
      active_[r] = 1;
      reach_.insert(rec.output_ids.begin(), rec.output_ids.end());
    }
  }

  // For `ready`: the sources whose gradient is final once record r has run (its earliest
  // active consumer, as the sweep goes backwards).
  void plan_announcements() {
    std::unordered_map<uint64_t, size_t> first_use;
    for (size_t r = 0; r < records_.size(); ++r) {
      if (!active_[r]) continue;
      for (uint64_t id : records_[r].input_ids) first_use.try_emplace(id, r);
    }
    for (size_t i = 0; i < sources_.size(); ++i) {
      auto it = first_use.find(sources_[i].id());
      if (it != first_use.end()) final_after_[it->second].push_back(i);
    }
  }

  Gradient result_for(size_t i) {
    auto it = grads_.find(sources_[i].id());
    if (it != grads_.end()) {
      // Built, unless announce()'s receiver builds it.
      if (results_ != nullptr && it->second.deferred() != nullptr) {
        it->second = it->second.to_dense();
      }
      return it->second;
    }
    if (unconnected_ == UnconnectedGradients::kZero) return Gradient(filled_like(sources_[i], 0));
    return Gradient();
  }

  void announce(size_t r) {
    auto it = final_after_.find(r);
    if (it == final_after_.end()) return;
    for (size_t i : it->second) {
      announced_[i] = 1;
      ready_(i, result_for(i));
    }
  }

  // The gradients of record r's outputs, dense or (where its op takes them) deferred, zeros
  // for outputs nothing reached; false when none was reached.
  bool gather_output_gradients(const autodiff::Record& rec) {
    bool any = false;
    out_grads_.assign(rec.output_ids.size(), Tensor());
    deferred_.assign(rec.takes_deferred ? rec.output_ids.size() : 0, Gradient());
    for (size_t o = 0; o < rec.output_ids.size(); ++o) {
      auto it = grads_.find(rec.output_ids[o]);
      if (it == grads_.end()) continue;
      any = true;
      if (rec.takes_deferred && it->second.deferred() != nullptr) {
        deferred_[o] = it->second;
        continue;
      }
      out_grads_[o] = it->second.to_dense();
    }
    if (!any) return false;
    for (size_t o = 0; o < out_grads_.size(); ++o) {
      if (!out_grads_[o].defined() && (deferred_.empty() || !deferred_[o].defined())) {
        const auto& info = rec.outputs[o];
        out_grads_[o] = Tensor::zeros(info.shape, info.dtype, info.device);
      }
    }
    return true;
  }

  // announce(): the inputs that are sources record r finishes may stay unbuilt; not where
  // the op takes a source twice (its two parts are added, which builds them).
  void mark_unbuilt(size_t r, const autodiff::Record& rec) {
    unbuilt_.clear();
    auto it = final_after_.find(r);
    if (results_ != nullptr || it == final_after_.end()) return;
    unbuilt_.assign(rec.input_ids.size(), 0);
    for (size_t i = 0; i < rec.input_ids.size(); ++i) {
      const uint64_t id = rec.input_ids[i];
      unbuilt_[i] = std::count_if(it->second.begin(), it->second.end(),
                                  [&](size_t s) { return sources_[s].id() == id; }) == 1 &&
                    std::count(rec.input_ids.begin(), rec.input_ids.end(), id) == 1;
    }
  }

  void step(size_t r) {
    auto& rec = records_[r];
    if (!gather_output_gradients(rec)) {
      announce(r);
      return;
    }
    needs_.assign(rec.input_ids.size(), 0);
    for (size_t i = 0; i < rec.input_ids.size(); ++i) {
      needs_[i] = reach_.count(rec.input_ids[i]) != 0;
    }
    mark_unbuilt(r, rec);
    autodiff::BackwardContext ctx{out_grads_, needs_, deferred_, unbuilt_};
    std::vector<Gradient> in_grads;
    {
      profiler::Scope scope(profiler::enabled() ? grad_event_name(rec.op) : "gradient",
                            profiler::kGrad);
      in_grads = (*rec.backward)(ctx);
    }
    if (!persistent_) rec.backward.reset();  // release saved tensors as soon as possible
    for (size_t i = 0; i < rec.input_ids.size() && i < in_grads.size(); ++i) {
      if (!needs_[i] || !in_grads[i].defined()) continue;
      auto [it, inserted] = grads_.try_emplace(rec.input_ids[i], in_grads[i]);
      if (!inserted) it->second = add_gradients(it->second, in_grads[i]);
    }
    announce(r);
  }

  std::vector<autodiff::Record>& records_;
  const std::vector<Tensor>& sources_;
  const UnconnectedGradients unconnected_;
  const GradientTape::GradientReady& ready_;
  std::vector<Gradient>* results_;
  const bool persistent_;
  std::unordered_set<uint64_t> reach_;
  std::vector<char> active_;
  std::unordered_map<size_t, std::vector<size_t>> final_after_;
  std::vector<char> announced_;
  std::unordered_map<uint64_t, Gradient> grads_;
  // Per record, reused.
  std::vector<Tensor> out_grads_;
  std::vector<Gradient> deferred_;
  std::vector<char> needs_, unbuilt_;
};

}  // namespace

void GradientTape::run(const Tensor& target, const std::vector<Tensor>& sources,
                       UnconnectedGradients unconnected, const Tensor& output_gradient,
                       const GradientReady& ready, std::vector<Gradient>* results) {
  if (used_ && !persistent_) {
    throw FailedPreconditionError(
        "gradient: a non-persistent GradientTape computes gradients once; create the tape "
        "with persistent = true to call gradient() again");
  }
  if (!is_tracked(target)) {
    throw InvalidArgumentError(
        str_cat("gradient: the target (shape ", target.shape(), ", ", target.dtype(),
                ") is not on this tape: it was not computed, while the tape was recording, from a "
                "watched tensor or a trainable variable"));
  }
  if (output_gradient.defined() && output_gradient.shape() != target.shape()) {
    throw InvalidArgumentError(str_cat("gradient: output_gradient of shape ",
                                       output_gradient.shape(), " does not match the target's ",
                                       target.shape()));
  }
  used_ = true;
  NoGradScope no_grad;
  BackwardSweep(records_, sources, unconnected, ready, results, persistent_)
      .run(target, output_gradient);
  if (!persistent_) {
    records_.clear();
    tracked_.clear();
  }
}

NoGradScope::NoGradScope() { ++pause_depth; }
NoGradScope::~NoGradScope() { --pause_depth; }

namespace autodiff {

bool any_tape_active() { return !active_tapes.empty() && pause_depth == 0; }

bool should_record(std::span<const Tensor* const> inputs) {
  if (!any_tape_active()) return false;
  for (GradientTape* tape : active_tapes) {
    for (const Tensor* t : inputs) {
      if (t->defined() && tape->is_tracked(*t)) return true;
    }
  }
  return false;
}

bool should_record(std::span<const Tensor> inputs) {
  if (!any_tape_active()) return false;
  for (GradientTape* tape : active_tapes) {
    for (const Tensor& t : inputs) {
      if (t.defined() && tape->is_tracked(t)) return true;
    }
  }
  return false;
}

void record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
            BackwardFn backward, bool takes_deferred) {
  auto fn = std::make_shared<BackwardFn>(std::move(backward));
  for (GradientTape* tape : active_tapes) {
    bool tracks = std::any_of(inputs.begin(), inputs.end(),
                              [&](const Tensor& t) { return t.defined() && tape->is_tracked(t); });
    if (!tracks) continue;
    Record rec;
    rec.op = op;
    for (const Tensor& t : inputs) rec.input_ids.push_back(t.defined() ? t.id() : 0);
    for (const Tensor& t : outputs) {
      rec.output_ids.push_back(t.id());
      rec.outputs.push_back({t.shape(), t.dtype(), t.device()});
    }
    rec.backward = fn;
    rec.takes_deferred = takes_deferred;
    tape->add_record(std::move(rec));
  }
}

void watch_on_active_tapes(const Tensor& tensor) {
  if (pause_depth != 0) return;
  for (GradientTape* tape : active_tapes) tape->watch(tensor);
}

}  // namespace autodiff
}  // namespace cadre
