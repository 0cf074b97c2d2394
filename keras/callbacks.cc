// The built-in callbacks.
#include "cadre/keras/callbacks.h"

#include <glog/logging.h>

#include <cmath>

#include "cadre/base/errors.h"
#include "cadre/io/summary_writer.h"
#include "cadre/keras/model.h"
#include "core/base/strings.h"

namespace cadre::keras {

namespace {

bool higher_is_better(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  if (mode != "auto") {
    throw InvalidArgumentError(str_cat("mode '", mode, "'; expected auto, min or max"));
  }
  return monitor.find("acc") != std::string::npos || monitor.find("auc") != std::string::npos ||
         monitor.find("precision") != std::string::npos ||
         monitor.find("recall") != std::string::npos;
}

double monitored(const Logs& logs, const std::string& monitor, const char* who) {
  auto it = logs.find(monitor);
  if (it == logs.end()) {
    std::vector<std::string> names;
    for (const auto& [name, v] : logs) names.push_back(name);
    throw InvalidArgumentError(str_cat(who, ": monitor '", monitor,
                                       "' is not in the epoch's logs: ", join(names),
                                       " (val_ logs need validation_data)"));
  }
  return it->second;
}

bool improves(double value, const std::optional<double>& best, bool higher, double min_delta) {
  if (!best) return true;
  return higher ? value > *best + min_delta : value < *best - min_delta;
}

std::string with_epoch(const std::string& pattern, int epoch) {
  std::string out = pattern;
  const std::string key = "{epoch}";
  for (size_t at = out.find(key); at != std::string::npos; at = out.find(key)) {
    out.replace(at, key.size(), std::to_string(epoch + 1));
  }
  return out;
}

}  // namespace

Model& Callback::model() const {
  if (!model_)
    throw FailedPreconditionError("Callback::model: the callback is not attached to a fit");
  return *model_;
}

double History::last(const std::string& name) const {
  auto it = history.find(name);
  if (it == history.end() || it->second.empty()) {
    std::vector<std::string> names;
    for (const auto& [n, v] : history) names.push_back(n);
    throw NotFoundError(str_cat("History has no '", name, "'; it has: ", join(names)));
  }
  return it->second.back();
}

ModelCheckpoint::ModelCheckpoint(std::string filepath, ModelCheckpointOptions options)
    : filepath_(std::move(filepath)), options_(std::move(options)) {
  if (filepath_.empty()) throw InvalidArgumentError("ModelCheckpoint: filepath is empty");
  higher_is_better(options_.monitor, options_.mode);
}

void ModelCheckpoint::on_epoch_end(int epoch, const Logs& logs) {
  if (options_.save_best_only) {
    double value = monitored(logs, options_.monitor, "ModelCheckpoint");
    if (!improves(value, best_, higher_is_better(options_.monitor, options_.mode), 0)) return;
    best_ = value;
  }
  if (!model().is_chief()) return;
  std::string path = with_epoch(filepath_, epoch);
  model().save(path);
  saved_.push_back(path);
  if (options_.verbose > 0) LOG(INFO) << "epoch " << epoch + 1 << ": saved the model to " << path;
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  if (options_.patience < 0) throw InvalidArgumentError("EarlyStopping: patience must be >= 0");
  higher_is_better(options_.monitor, options_.mode);
}

void EarlyStopping::on_train_begin(const Logs&) {
  best_.reset();
  wait_ = 0;
  stopped_epoch_ = -1;
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  if (epoch < options_.start_from_epoch) return;
  double value = monitored(logs, options_.monitor, "EarlyStopping");
  if (improves(value, best_, higher_is_better(options_.monitor, options_.mode),
               options_.min_delta)) {
    best_ = value;
    wait_ = 0;
    return;
  }
  if (++wait_ > options_.patience) {
    stopped_epoch_ = epoch;
    model().stop_training = true;
    LOG(INFO) << "EarlyStopping: " << options_.monitor << " has not improved for " << wait_
              << " epoch(s); stopping after epoch " << epoch + 1;
  }
}

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : options_(std::move(options)) {
  if (!(options_.factor > 0 && options_.factor < 1)) {
    throw InvalidArgumentError(
        str_cat("ReduceLROnPlateau: factor ", options_.factor, " must be in (0, 1)"));
  }
  higher_is_better(options_.monitor, options_.mode);
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  best_.reset();
  wait_ = 0;
  cooldown_left_ = 0;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  double value = monitored(logs, options_.monitor, "ReduceLROnPlateau");
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  if (improves(value, best_, higher_is_better(options_.monitor, options_.mode),
               options_.min_delta)) {
    best_ = value;
    wait_ = 0;
    return;
  }
  if (cooldown_left_ > 0 || ++wait_ < options_.patience) return;
  double old_lr = model().learning_rate();
  double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
  if (new_lr < old_lr) {
    model().set_learning_rate(new_lr);
    LOG(INFO) << "ReduceLROnPlateau: epoch " << epoch + 1 << ": learning rate " << old_lr << " -> "
              << new_lr;
  }
  cooldown_left_ = options_.cooldown;
  wait_ = 0;
}

TensorBoard::TensorBoard(std::string log_dir) : log_dir_(std::move(log_dir)) {
  if (log_dir_.empty()) throw InvalidArgumentError("TensorBoard: log_dir is empty");
}
TensorBoard::~TensorBoard() = default;

void TensorBoard::on_train_begin(const Logs&) {}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  if (!model().is_chief()) return;
  // Each writer is opened at its first scalar, as Keras's are: a fit that fails before an
  // epoch ends, or has no validation data, leaves no empty event file.
  auto writer = [&](std::unique_ptr<io::SummaryWriter>& w, const char* dir) -> io::SummaryWriter& {
    if (!w) {
      io::SummaryWriterOptions options;
      options.env = model().config().file_system();
      w = std::make_unique<io::SummaryWriter>(log_dir_ + "/" + dir, options);
    }
    return *w;
  };
  for (const auto& [name, value] : logs) {
    if (name.starts_with("val_")) {
      writer(validation_, "validation").scalar("epoch_" + name.substr(4), value, epoch);
    } else {
      writer(train_, "train").scalar("epoch_" + name, value, epoch);
    }
  }
  if (train_) train_->flush();
  if (validation_) validation_->flush();
}

void TensorBoard::on_train_end(const Logs&) {
  if (train_) train_->close();
  if (validation_) validation_->close();
  train_.reset();
  validation_.reset();
}

BackupAndRestore::BackupAndRestore(std::string backup_dir, BackupAndRestoreOptions options)
    : backup_dir_(std::move(backup_dir)), options_(options) {
  if (backup_dir_.empty()) throw InvalidArgumentError("BackupAndRestore: backup_dir is empty");
  if (options_.save_freq_steps < 0) {
    throw InvalidArgumentError("BackupAndRestore: save_freq_steps must be >= 0");
  }
}

}  // namespace cadre::keras
