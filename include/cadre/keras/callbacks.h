// Callbacks: code fit() runs at the start and end of training, of each epoch and of each
// batch, as tf.keras.callbacks. Logs map names to numbers: "loss" and each metric (the
// epoch's mean so far), and at the end of an epoch with validation data "val_loss" and
// "val_<metric>".
//
// In a multi-worker job every worker runs fit and its callbacks; the epoch logs are the
// chief's on every worker, so callbacks that decide from them (EarlyStopping,
// ReduceLROnPlateau) decide the same everywhere; those that write files (ModelCheckpoint,
// TensorBoard, BackupAndRestore) write on the chief only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cadre {
namespace io {
class SummaryWriter;
}

namespace keras {

class Model;
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  virtual void on_epoch_end(int epoch, const Logs& logs) {}
  // `batch` counts the batches of the epoch from 0.
  virtual void on_train_batch_begin(int64_t batch, const Logs& logs) {}
  virtual void on_train_batch_end(int64_t batch, const Logs& logs) {}

  // The model being fitted (set by fit before on_train_begin).
  void set_model(Model* model) { model_ = model; }
  Model& model() const;

 private:
  Model* model_ = nullptr;
};
using Callbacks = std::vector<std::shared_ptr<Callback>>;

// What fit returns: the epoch numbers and each log's value per epoch.
struct History {
  std::vector<int> epoch{};
  std::map<std::string, std::vector<double>> history{};
  // The value of `name` at the last epoch; NotFoundError listing the names when absent.
  double last(const std::string& name) const;
};

// "min", "max" or "auto" (max for accuracies and AUC, else min).
struct MonitorOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  double min_delta = 0;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  bool save_best_only = false;
  int verbose = 0;
};
// Saves the model (Model::save) at the end of each epoch into `filepath`, where "{epoch}"
// becomes the epoch number (from 1, as Keras writes it); with save_best_only, only when the
// monitored value improved on the best so far. A monitored value missing from the logs is
// an InvalidArgumentError listing the logs.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_epoch_end(int epoch, const Logs& logs) override;
  // The directories written so far, oldest first.
  const std::vector<std::string>& saved() const { return saved_; }

 private:
  std::string filepath_;
  ModelCheckpointOptions options_;
  std::optional<double> best_;
  std::vector<std::string> saved_;
};

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  double min_delta = 0;
  int patience = 0;
  int start_from_epoch = 0;
};
// Stops fit once `patience` epochs in a row have not improved the monitored value by more
// than min_delta (Keras's restore_best_weights is not offered: use ModelCheckpoint with
// save_best_only and load_model).
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  // The epoch fit stopped after (0-based), or -1.
  int stopped_epoch() const { return stopped_epoch_; }

 private:
  EarlyStoppingOptions options_;
  std::optional<double> best_;
  int wait_ = 0;
  int stopped_epoch_ = -1;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  double factor = 0.1;
  int patience = 10;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
  int verbose = 0;
};
// Multiplies the optimizer's learning rate by `factor` (not below min_lr) once `patience`
// epochs have not improved the monitored value; the new rate applies from the next epoch
// (and is checkpointed with the fit's progress by BackupAndRestore). The optimizer must have
// a constant learning rate (InvalidArgumentError otherwise, as in Keras).
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  ReduceLROnPlateauOptions options_;
  std::optional<double> best_;
  int wait_ = 0;
  int cooldown_left_ = 0;
};

// Writes each epoch's logs as TensorBoard scalars ("epoch_loss", "epoch_accuracy", ...) to
// log_dir/train and the validation ones to log_dir/validation, in the event files the
// Estimator writes (io::SummaryWriter), at the epoch number as step; on the chief. The
// Estimator's own step summaries stay in the model's model_dir (and model_dir/eval).
class TensorBoard : public Callback {
 public:
  explicit TensorBoard(std::string log_dir);
  ~TensorBoard() override;
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  const std::string& log_dir() const { return log_dir_; }

 private:
  std::string log_dir_;
  std::unique_ptr<io::SummaryWriter> train_;
  std::unique_ptr<io::SummaryWriter> validation_;
};

struct BackupAndRestoreOptions {
  // Checkpoint every this many steps as well as at the end of each epoch; 0: per epoch.
  int64_t save_freq_steps = 0;
  // Remove the progress record when fit ends normally (Keras's delete_checkpoint).
  bool delete_checkpoint = true;
};
// Fault tolerance: a fit that is killed and started again with the same program resumes
// where the last checkpoint left it, mid-epoch included, and ends with the variables an
// uninterrupted fit has. The checkpoints (variables, optimizer slots, global step, random
// streams, input positions) are the Estimator's, in the model's model_dir; backup_dir
// keeps the fit's progress (the step it started at, the epochs done and their history,
// the learning rate). A model compiled without an explicit model_dir trains in backup_dir,
// so that the checkpoints outlive the process.
class BackupAndRestore : public Callback {
 public:
  explicit BackupAndRestore(std::string backup_dir, BackupAndRestoreOptions options = {});
  const std::string& backup_dir() const { return backup_dir_; }
  const BackupAndRestoreOptions& options() const { return options_; }

 private:
  std::string backup_dir_;
  BackupAndRestoreOptions options_;
};

}  // namespace keras
}  // namespace cadre
