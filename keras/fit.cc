// Model::fit over the Estimator: fit runs Estimator::train once per epoch up to the epoch's
// last global step, with a hook that feeds the batch callbacks and the progress bar, then
// Estimator::evaluate on the validation data (evaluate and predict: keras/evaluate.cc).
#include <glog/logging.h>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "cadre/checkpoint/state_file.h"
#include "cadre/estimator/hooks.h"
#include "cadre/estimator/train_and_evaluate.h"
#include "core/base/strings.h"
#include "keras/fit_state.h"
#include "keras/model_state.h"
#include "keras/progbar.h"
#include "strategies/strategy_extended.h"

namespace cadre::keras {

namespace internal {

// Global batches per replica: the Dataset as it is on one replica, else re-batched to the
// replica's share of the global batch (read from the first batch), as Keras splits it.
InputFn per_replica_input(io::Dataset dataset) {
  auto global_batch = std::make_shared<int64_t>(0);
  return [dataset, global_batch](const InputContext& context) -> io::Dataset {
    if (context.num_replicas_in_sync == 1) return dataset;
    if (*global_batch == 0) {
      io::Iterator it = dataset.make_iterator();
      std::optional<io::Element> first = it.next();
      if (!first) return dataset;
      const Tensor& t = first->labels.defined() ? first->labels : first->features.begin()->second;
      *global_batch = t.rank() > 0 ? t.shape()[0] : 1;
    }
    return dataset.unbatch().batch(context.per_replica_batch_size(*global_batch));
  };
}

}  // namespace internal

namespace {

using internal::FitState;

int64_t count_batches(const io::Dataset& dataset) {
  constexpr int64_t kLimit = 10'000'000;
  io::Iterator it = dataset.make_iterator();
  int64_t n = 0;
  while (it.next()) {
    if (++n >= kLimit) {
      throw InvalidArgumentError(str_cat("fit: the Dataset has more than ", kLimit,
                                         " batches (is it repeated?); pass steps_per_epoch"));
    }
  }
  if (n == 0) throw InvalidArgumentError("fit: the Dataset is empty");
  return n;
}

// The chief's value of `bytes` on every worker that steps with it (the job's own otherwise).
std::string from_chief(const Strategy* strategy, std::string bytes) {
  if (!strategy || strategy->num_workers_in_sync() <= 1) return bytes;
  return strategy->extended().all_gather_bytes(std::move(bytes)).at(0);
}

// The global step of model_dir's latest checkpoint (0 without one), and its path.
int64_t latest_step(const std::string& model_dir, std::string* path = nullptr) {
  std::optional<std::string> latest = checkpoint::latest_checkpoint(model_dir);
  if (!latest) return 0;
  if (path) *path = *latest;
  return checkpoint::CheckpointReader::open(*latest)->global_step();
}

// Feeds the batch callbacks and the progress bar, and keeps the epoch's running means
// (weighted by batch size, as Keras's metrics are).
class EpochHook : public Hook {
 public:
  EpochHook(Model& model, const Callbacks& callbacks, internal::Progbar* bar, int64_t epoch_start)
      : model_(model), callbacks_(callbacks), bar_(bar), epoch_start_(epoch_start) {}

  void before_run(Run& run, RunContext&) override {
    if (callbacks_.empty()) return;
    for (const auto& c : callbacks_)
      c->on_train_batch_begin(run.global_step() - epoch_start_, logs_);
  }

  void after_run(Run& run, const StepResult& result, RunContext& context) override {
    double weight = static_cast<double>(std::max<int64_t>(result.batch_size, 1));
    count_ += weight;
    sums_["loss"] += result.loss * weight;
    if (result.spec) {
      for (const auto& [name, value] : result.spec->scalar_summaries) {
        sums_[name] += value.item<double>() * weight;
      }
    }
    for (const auto& [name, sum] : sums_) logs_[name] = sum / count_;
    int64_t batch = result.global_step - epoch_start_ - 1;
    for (const auto& c : callbacks_) c->on_train_batch_end(batch, logs_);
    if (bar_) bar_->update(batch + 1, logs_);
    if (model_.stop_training) context.request_stop();
  }

  const Logs& logs() const { return logs_; }

 private:
  Model& model_;
  const Callbacks& callbacks_;
  internal::Progbar* bar_;
  int64_t epoch_start_;
  double count_ = 0;
  std::map<std::string, double> sums_;
  Logs logs_;
};

// Throws for a model or options fit cannot run with, then builds the model. As
// train_and_evaluate: every task runs the same program, and a ps task serves the variables
// here (never returning).
void prepare_fit(Model::State& s, const std::optional<io::Dataset>& dataset, const FitOptions& o) {
  if (!s.compiled) {
    throw FailedPreconditionError(str_cat("fit: model '", s.name,
                                          "' is not compiled; call compile({.optimizer, .loss, "
                                          ".metrics}) before fit"));
  }
  if (s.config.task_type == "ps") serve_parameters(s.config);
  if (o.epochs < 0 || o.initial_epoch < 0) {
    throw InvalidArgumentError(str_cat("fit: epochs (", o.epochs, ") and initial_epoch (",
                                       o.initial_epoch, ") must be >= 0"));
  }
  if ((o.steps_per_epoch && *o.steps_per_epoch <= 0) ||
      (o.validation_steps && *o.validation_steps <= 0)) {
    throw InvalidArgumentError("fit: steps_per_epoch and validation_steps must be positive");
  }
  if (o.verbose < 0 || o.verbose > 2) {
    throw InvalidArgumentError(str_cat("fit: verbose is ", o.verbose, "; expected 0, 1 or 2"));
  }
  internal::ensure_built(s, dataset ? &*dataset : nullptr);
  if (!dataset && !o.steps_per_epoch) {
    throw InvalidArgumentError("fit: an input_fn needs steps_per_epoch");
  }
}

// The last BackupAndRestore among the callbacks, or null.
const BackupAndRestore* backup_of(const Callbacks& callbacks) {
  const BackupAndRestore* backup = nullptr;
  for (const auto& c : callbacks) {
    if (auto* b = dynamic_cast<const BackupAndRestore*>(c.get())) backup = b;
  }
  return backup;
}

// The RunConfig fit trains with: the model's, with the backup's checkpoint frequency. The
// backup's directory becomes the model's model_dir when it had none of its own (the
// checkpoints must outlive the process).
RunConfig fit_config(Model::State& s, const BackupAndRestore* backup) {
  if (backup && !s.explicit_model_dir) {
    s.config.model_dir = backup->backup_dir();
    s.explicit_model_dir = true;
  }
  RunConfig config = s.config;
  if (backup && backup->options().save_freq_steps > 0) {
    config.save_checkpoints_steps = backup->options().save_freq_steps;
    config.save_checkpoints_secs.reset();
  }
  return config;
}

// One call of fit, once checked, in its phases: where it starts (the chief's view, shared
// with every worker), then per epoch: train, validate, share the logs, record them.
class FitRun {
 public:
  FitRun(Model& model, const FitOptions& o)
      : model_(model),
        s_(*model.state()),
        o_(o),
        backup_(backup_of(o.callbacks)),
        config_(fit_config(s_, backup_)),
        strategy_(config_.train_distribute.get()),
        env_(config_.file_system()),
        callbacks_(o.callbacks) {}

  History run(const InputFn& input_fn, const std::optional<io::Dataset>& dataset) {
    FitState chief_state;
    if (config_.is_chief) chief_state = start_on_chief(dataset);
    state_ = internal::decode_fit_state(
        from_chief(strategy_, internal::encode_fit_state(chief_state)), "the chief's fit state");
    if (state_.learning_rate != model_.learning_rate()) {
      model_.set_learning_rate(state_.learning_rate);
    }
    InputFn train_input = input_fn;
    if (dataset)
      train_input = internal::per_replica_input(o_.steps_per_epoch ? *dataset : dataset->repeat());

    Estimator estimator(model_.model_fn(), config_);
    s_.weights_from_this_process = true;  // the checkpoints this fit writes are the model's own
    history_ = state_.history;
    for (const auto& c : callbacks_) c->set_model(&model_);
    model_.stop_training = false;
    for (const auto& c : callbacks_) c->on_train_begin(logs_);
    int first_epoch = state_.initial_epoch + static_cast<int>(history_.epoch.size());
    for (int epoch = first_epoch; epoch < o_.epochs && !model_.stop_training; ++epoch) {
      run_epoch(estimator, train_input, epoch);
    }
    for (const auto& c : callbacks_) c->on_train_end(logs_);
    if (backup_ && backup_->options().delete_checkpoint && config_.is_chief) {
      internal::remove_fit_state(*env_, backup_->backup_dir());
    }
    return history_;
  }

 private:
  // Where this fit starts, as the chief sees it: where its backup left it, else a new fit
  // from model_dir's latest checkpoint (recorded in the backup).
  FitState start_on_chief(const std::optional<io::Dataset>& dataset) {
    std::optional<FitState> saved;
    if (backup_) saved = internal::read_fit_state(*env_, backup_->backup_dir());
    if (saved) {
      LOG(INFO) << "BackupAndRestore: resuming the fit that started at step " << saved->start_step
                << " after " << saved->history.epoch.size() << " epoch(s), from "
                << config_.model_dir;
      return *saved;
    }
    FitState state;
    std::string resumed;
    state.start_step = latest_step(config_.model_dir, &resumed);
    if (state.start_step > 0 && !s_.weights_from_this_process) {
      // A fresh model picks up what an earlier program left in its model_dir, as the
      // Estimator resumes: said loudly, since a Keras user expects initial weights.
      LOG(WARNING) << "fit: model '" << s_.name << "' resumes from " << resumed << " (global step "
                   << state.start_step << "), the checkpoint already in "
                   << "its model_dir " << config_.model_dir
                   << ", not from its initial weights; give compile a new model_dir to "
                      "train from scratch";
    }
    state.initial_epoch = o_.initial_epoch;
    state.steps_per_epoch = o_.steps_per_epoch ? *o_.steps_per_epoch : count_batches(*dataset);
    state.learning_rate = model_.learning_rate();
    if (backup_) internal::write_fit_state(*env_, backup_->backup_dir(), state);
    return state;
  }

  void run_epoch(Estimator& estimator, const InputFn& train_input, int epoch) {
    for (const auto& c : callbacks_) c->on_epoch_begin(epoch, logs_);
    const int64_t steps = state_.steps_per_epoch;
    int64_t epoch_start = state_.start_step + (epoch - state_.initial_epoch) * steps;
    internal::Progbar bar(o_.output, config_.is_chief ? o_.verbose : 0, steps);
    bar.epoch_header(epoch, o_.epochs);
    train(estimator, train_input, epoch, epoch_start, bar);
    bool evaluates = config_.is_chief || (strategy_ && strategy_->num_workers_in_sync() > 1);
    if (o_.validation_data && config_.is_chief) validate(estimator);
    if (evaluates) {
      logs_ = internal::decode_logs(from_chief(strategy_, internal::encode_logs(logs_)));
    }
    history_.epoch.push_back(epoch);
    for (const auto& [name, value] : logs_) history_.history[name].push_back(value);
    for (const auto& c : callbacks_) c->on_epoch_end(epoch, logs_);
    bar.finish(steps, logs_);
    if (strategy_ && strategy_->num_workers_in_sync() > 1) {
      model_.stop_training = strategy_->extended().broadcast_from_chief(model_.stop_training) != 0;
    }
    if (backup_ && config_.is_chief) {
      state_.history = history_;
      state_.learning_rate = model_.learning_rate();
      internal::write_fit_state(*env_, backup_->backup_dir(), state_);
    }
  }

  // Trains the epoch's steps; its logs are the running means of its batches.
  void train(Estimator& estimator, const InputFn& train_input, int epoch, int64_t epoch_start,
             internal::Progbar& bar) {
    const int64_t steps = state_.steps_per_epoch;
    auto hook = std::make_shared<EpochHook>(model_, callbacks_, &bar, epoch_start);
    TrainArgs args;
    args.max_steps = epoch_start + steps;
    args.hooks = {hook};
    int64_t reached = estimator.train(train_input, args);
    logs_ = hook->logs();
    if (reached < epoch_start + steps && !model_.stop_training) {
      LOG(WARNING) << "fit: the input ran out of data at step " << reached << " of epoch "
                   << epoch + 1 << " (" << epoch_start + steps
                   << " expected); stopping. Repeat the Dataset or lower steps_per_epoch";
      model_.stop_training = true;
    }
  }

  // Adds the validation data's loss and metrics to the logs ("val_" + name).
  void validate(Estimator& estimator) {
    EvalArgs eval_args;
    eval_args.steps = o_.validation_steps;
    EvalResult val =
        estimator.evaluate(internal::per_replica_input(*o_.validation_data), eval_args);
    for (const auto& [name, value] : val) {
      if (name != "global_step") logs_["val_" + name] = value;
    }
  }

  Model& model_;
  Model::State& s_;
  const FitOptions& o_;
  const BackupAndRestore* backup_;
  RunConfig config_;
  const Strategy* strategy_;
  std::shared_ptr<Env> env_;
  Callbacks callbacks_;
  FitState state_;
  History history_;
  Logs logs_;
};

History run_fit(Model& model, const InputFn& input_fn, const std::optional<io::Dataset>& dataset,
                const FitOptions& o) {
  prepare_fit(*model.state(), dataset, o);
  FitRun fit(model, o);
  return fit.run(input_fn, dataset);
}

}  // namespace

History Model::fit(const io::Dataset& x, FitOptions options) {
  return run_fit(*this, InputFn(), x, options);
}

History Model::fit(const InputFn& input_fn, FitOptions options) {
  if (!input_fn) throw InvalidArgumentError("fit: the input_fn is empty");
  return run_fit(*this, input_fn, std::nullopt, options);
}

}  // namespace cadre::keras
