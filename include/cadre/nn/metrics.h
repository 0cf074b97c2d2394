// Streaming metrics for evaluation. A metric's state is a few float64 counters that add up
// elementwise across replicas and workers (merge()), so a distributed evaluation reduces
// states and then takes result() once.
//
// The functions in nn::metrics find a metric by name in the current VariableStore,
// create it the first time, update it with one batch and return it: call them in model
// code every evaluation step, as with tf.compat.v1.metrics.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre::nn {

// Not synchronised: one replica thread updates a metric; merge() combines them afterwards.
class Metric {
 public:
  explicit Metric(std::string name, size_t state_size);
  virtual ~Metric() = default;

  const std::string& name() const { return name_; }
  // Updates the state with one batch. Weights (undefined, or broadcastable to labels)
  // scale each example's contribution.
  void update(const Tensor& labels, const Tensor& predictions, const Tensor& weights = Tensor());
  virtual double result() const = 0;
  void reset();

  const std::vector<double>& state() const { return state_; }
  void set_state(const std::vector<double>& state);
  // Adds `other`'s state (a metric of the same kind and configuration) into this one.
  void merge(const Metric& other);

 protected:
  virtual void update_state(const Tensor& labels, const Tensor& predictions,
                            const Tensor& weights) = 0;

  std::vector<double> state_;

 private:
  std::string name_;
};

// Weighted mean of values (labels unused): state {total, count}.
class Mean : public Metric {
 public:
  explicit Mean(std::string name = "mean") : Metric(std::move(name), 2) {}
  using Metric::update;
  void update(const Tensor& values) { update(Tensor(), values, Tensor()); }
  double result() const override;

 protected:
  void update_state(const Tensor& labels, const Tensor& values, const Tensor& weights) override;
};

// Fraction of correct predictions. predictions of labels' rank are class ids; of one more
// rank, scores whose argmax over the last axis is the class. State {correct, count}.
class Accuracy : public Metric {
 public:
  explicit Accuracy(std::string name = "accuracy") : Metric(std::move(name), 2) {}
  double result() const override;

 protected:
  void update_state(const Tensor& labels, const Tensor& predictions,
                    const Tensor& weights) override;
};

// Binary: predictions > threshold count as positive; labels non-zero are positive.
class Precision : public Metric {
 public:
  explicit Precision(std::string name = "precision", double threshold = 0.5)
      : Metric(std::move(name), 2), threshold_(threshold) {}
  double result() const override;  // tp / (tp + fp); 0 when nothing was predicted positive

 protected:
  void update_state(const Tensor& labels, const Tensor& predictions,
                    const Tensor& weights) override;

 private:
  double threshold_;
};

class Recall : public Metric {
 public:
  explicit Recall(std::string name = "recall", double threshold = 0.5)
      : Metric(std::move(name), 2), threshold_(threshold) {}
  double result() const override;  // tp / (tp + fn)

 protected:
  void update_state(const Tensor& labels, const Tensor& predictions,
                    const Tensor& weights) override;

 private:
  double threshold_;
};

// Area under the ROC (or precision-recall) curve from confusion counts at num_thresholds
// thresholds spread evenly over [0, 1], as tf.keras.metrics.AUC's default: the ROC curve by
// the trapezoidal rule, the precision-recall curve by its interpolation. predictions are
// probabilities in [0, 1].
class Auc : public Metric {
 public:
  enum class Curve { kRoc, kPr };
  explicit Auc(std::string name = "auc", int num_thresholds = 200, Curve curve = Curve::kRoc);
  double result() const override;

 protected:
  void update_state(const Tensor& labels, const Tensor& predictions,
                    const Tensor& weights) override;

 private:
  double pr_interpolated() const;

  int num_thresholds_;
  Curve curve_;
  std::vector<double> thresholds_;
};

namespace metrics {

// Each finds or creates the named metric in the current store and updates it.
std::shared_ptr<Metric> mean(const Tensor& values, const Tensor& weights = Tensor(),
                             const std::string& name = "mean");
std::shared_ptr<Metric> accuracy(const Tensor& labels, const Tensor& predictions,
                                 const Tensor& weights = Tensor(),
                                 const std::string& name = "accuracy");
std::shared_ptr<Metric> precision(const Tensor& labels, const Tensor& predictions,
                                  const Tensor& weights = Tensor(),
                                  const std::string& name = "precision");
std::shared_ptr<Metric> recall(const Tensor& labels, const Tensor& predictions,
                               const Tensor& weights = Tensor(),
                               const std::string& name = "recall");
std::shared_ptr<Metric> auc(const Tensor& labels, const Tensor& predictions,
                            const Tensor& weights = Tensor(), const std::string& name = "auc");

}  // namespace metrics
}  // namespace cadre::nn
