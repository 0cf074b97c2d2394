// Reverse-mode automatic differentiation with a gradient tape, as in TensorFlow:
//
//   GradientTape tape;            // records ops on this thread from now on
//   tape.watch(x);                // trainable variables are watched when read
//   Tensor y = f(x);
//   Gradient dx = tape.gradient(y, x);
//
// A tape belongs to the thread that made it (each replica thread has its own) and records
// only ops that take a tensor it tracks: a watched tensor or the output of a recorded op.
// It keeps what the backward pass needs until gradient() has run (or the tape dies, for a
// persistent tape): nothing outlives the tape, so nothing is kept across training steps.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <unordered_set>
#include <vector>

#include "cadre/autodiff/gradient.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

// What gradient() returns for a source the target does not depend on.
enum class UnconnectedGradients { kNone, kZero };

namespace autodiff {

// What a backward function receives: the gradients of its op's outputs (dense, zeros for
// an output that got none) and which inputs need a gradient. For an op recorded as taking
// deferred gradients, an output whose gradient is deferred has it in `deferred` instead
// (and an undefined tensor in output_grads). An input marked in `unbuilt` is a source
// whose final gradient this op makes, for a receiver that builds gradients in pieces
// (GradientTape::announce): the op may return it as a DeferredGradient that can build its
// rows alone.
struct BackwardContext {
  std::span<const Tensor> output_grads;
  std::span<const char> needs;
  std::span<const Gradient> deferred = {};
  std::span<const char> unbuilt = {};
  const Tensor& grad(int output = 0) const { return output_grads[output]; }
  const DeferredGradient* deferred_grad(int output = 0) const {
    return deferred.empty() ? nullptr : deferred[output].deferred();
  }
  bool needs_grad(int input) const { return needs[input] != 0; }
  bool may_leave_unbuilt(int input) const { return !unbuilt.empty() && unbuilt[input] != 0; }
};

// Returns one gradient per input (undefined where not needed or not differentiable).
using BackwardFn = std::function<std::vector<Gradient>(const BackwardContext&)>;

struct Record {
  const char* op;
  std::vector<uint64_t> input_ids;
  std::vector<uint64_t> output_ids;
  struct OutputInfo {
    Shape shape;
    DType dtype;
    Device device;
  };
  std::vector<OutputInfo> outputs;
  std::shared_ptr<BackwardFn> backward;
  bool takes_deferred = false;
};

}  // namespace autodiff

class GradientTape {
 public:
  // A persistent tape allows several gradient() calls; a plain one releases what it
  // recorded during its single gradient() call.
  explicit GradientTape(bool persistent = false);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Starts tracking `tensor` (ops that take it are recorded from now on).
  void watch(const Tensor& tensor);
  bool is_tracked(const Tensor& tensor) const { return tracked_.count(tensor.id()) != 0; }

  // d target / d source for each source. `output_gradient` (target's shape) seeds the
  // backward pass; ones when undefined. Throws InvalidArgumentError when the target was
  // not computed on this tape from a tracked tensor, FailedPreconditionError when a
  // non-persistent tape is asked twice.
  //
  // `ready`, when given, is called on this thread with each source's index and final
  // gradient as soon as the backward pass has no more to add to it (the sources used last
  // in the forward pass come first), so that a caller can start reducing it while the
  // pass goes on (as PyTorch DDP's gradient hooks do). Each index once; the result is the
  // same.
  using GradientReady = std::function<void(size_t source, const Gradient& gradient)>;
  std::vector<Gradient> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                 UnconnectedGradients unconnected = UnconnectedGradients::kNone,
                                 const Tensor& output_gradient = Tensor(),
                                 const GradientReady& ready = {});
  Gradient gradient(const Tensor& target, const Tensor& source,
                    UnconnectedGradients unconnected = UnconnectedGradients::kNone);
  // gradient() for a caller that takes every source's gradient from `ready` alone (a
  // reduction across workers): nothing is returned, and a final gradient that its op can
  // build by rows (a dense layer's kernel) comes unbuilt (Gradient::deferred(), with
  // DeferredGradient::rows), so that the caller can build and send its first rows while it
  // builds the next. A source the target does not depend on comes undefined.
  void announce(const Tensor& target, const std::vector<Tensor>& sources,
                const GradientReady& ready);

  // For op implementations (see autodiff::record).
  void add_record(autodiff::Record record);
  size_t num_records() const { return records_.size(); }

 private:
  // gradient() and announce(); with `results`, each source's gradient built.
  void run(const Tensor& target, const std::vector<Tensor>& sources,
           UnconnectedGradients unconnected, const Tensor& output_gradient,
           const GradientReady& ready, std::vector<Gradient>* results);

  bool persistent_;
  bool used_ = false;
  std::unordered_set<uint64_t> tracked_;
  std::vector<autodiff::Record> records_;
};

// Ops run inside this scope are not recorded on any tape of this thread.
class NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;
};

namespace autodiff {

// True when some active tape of this thread tracks one of `inputs` and recording is not
// paused: the op must then call record().
bool should_record(std::span<const Tensor* const> inputs);
inline bool should_record(std::initializer_list<const Tensor*> inputs) {
  return should_record(std::span<const Tensor* const>(inputs.begin(), inputs.size()));
}
bool should_record(std::span<const Tensor> inputs);
// Records an op on every active tape that tracks one of its inputs. With `takes_deferred`
// its backward function may be handed deferred gradients (BackwardContext::deferred_grad).
void record(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
            BackwardFn backward, bool takes_deferred = false);
// Watches `tensor` on every active tape of this thread (used for trainable variables).
void watch_on_active_tapes(const Tensor& tensor);
bool any_tape_active();

}  // namespace autodiff
}  // namespace cadre
