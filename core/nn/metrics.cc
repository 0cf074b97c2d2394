#include "cadre/nn/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <typeinfo>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/nn/variable_store.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"

namespace cadre::nn {
namespace {

// Per-example weights as float64, broadcast to `like`'s shape (ones when undefined).
Tensor weights_for(const Tensor& weights, const Tensor& like, const std::string& metric) {
  if (!weights.defined()) return Tensor::ones(like.shape(), DType::kFloat64, like.device());
  Tensor w = cast(weights, DType::kFloat64);
  if (w.device() != like.device()) w = w.to(like.device());
  try {
    return contiguous(broadcast_to(w, like.shape()));
  } catch (const InvalidArgumentError&) {
    throw InvalidArgumentError(str_cat("metric '", metric, "': weights of shape ", weights.shape(),
                                       " do not broadcast to ", like.shape()));
  }
}

double total(const Tensor& x) { return sum(x).item<double>(); }

void check_binary_inputs(const std::string& metric, const Tensor& labels,
                         const Tensor& predictions) {
  if (!labels.defined() || !predictions.defined() || labels.shape() != predictions.shape()) {
    throw InvalidArgumentError(str_cat(
        "metric '", metric, "': labels of shape ",
        labels.defined() ? labels.shape().to_string() : "undefined", " and predictions of shape ",
        predictions.defined() ? predictions.shape().to_string() : "undefined", " must match"));
  }
}

// tp, fp, fn (weighted) at `threshold`.
std::array<double, 3> confusion(const Tensor& labels, const Tensor& predictions,
                                const Tensor& weights, double threshold) {
  Tensor positive = cast(not_equal(cast(labels, DType::kFloat64),
                                   Tensor::zeros(Shape{}, DType::kFloat64, labels.device())),
                         DType::kFloat64);
  Tensor predicted =
      cast(greater(cast(predictions, DType::kFloat64),
                   Tensor::full(Shape{}, threshold, DType::kFloat64, labels.device())),
           DType::kFloat64);
  Tensor one = Tensor::ones(Shape{}, DType::kFloat64, labels.device());
  double tp = total(mul(mul(positive, predicted), weights));
  double fp = total(mul(mul(sub(one, positive), predicted), weights));
  double fn = total(mul(mul(positive, sub(one, predicted)), weights));
  return {tp, fp, fn};
}

}  // namespace

Metric::Metric(std::string name, size_t state_size)
    : state_(state_size, 0.0), name_(std::move(name)) {}

void Metric::update(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  NoGradScope no_grad;
  update_state(labels, predictions, weights);
}

void Metric::reset() { std::fill(state_.begin(), state_.end(), 0.0); }

void Metric::set_state(const std::vector<double>& state) {
  if (state.size() != state_.size()) {
    throw InvalidArgumentError(str_cat("metric '", name_, "': state of ", state.size(),
                                       " values; expected ", state_.size()));
  }
  state_ = state;
}

void Metric::merge(const Metric& other) {
  if (other.state_.size() != state_.size() || typeid(other) != typeid(*this)) {
    throw InvalidArgumentError(str_cat("metric '", name_, "': cannot merge metric '", other.name_,
                                       "' of another kind or configuration"));
  }
  for (size_t i = 0; i < state_.size(); ++i) state_[i] += other.state_[i];
}

void Mean::update_state(const Tensor&, const Tensor& values, const Tensor& weights) {
  if (!values.defined()) throw InvalidArgumentError(str_cat("metric '", name(), "': no values"));
  Tensor v = cast(values, DType::kFloat64);
  Tensor w = weights_for(weights, v, name());
  state_[0] += total(mul(v, w));
  state_[1] += total(w);
}

double Mean::result() const { return state_[1] == 0 ? 0.0 : state_[0] / state_[1]; }

void Accuracy::update_state(const Tensor& labels, const Tensor& predictions,
                            const Tensor& weights) {
  if (!labels.defined() || !predictions.defined()) {
    throw InvalidArgumentError(
        str_cat("metric '", name(), "': labels and predictions are required"));
  }
  Tensor classes = predictions;
  if (predictions.rank() == labels.rank() + 1) {
    classes = argmax(predictions, -1);
  } else if (predictions.rank() != labels.rank()) {
    throw InvalidArgumentError(str_cat("metric '", name(), "': predictions of shape ",
                                       predictions.shape(), " fit neither labels of shape ",
                                       labels.shape(),
                                       " (class ids) nor labels' shape + [classes] (scores)"));
  }
  if (classes.shape() != labels.shape()) {
    throw InvalidArgumentError(str_cat("metric '", name(), "': predicted classes of shape ",
                                       classes.shape(), " do not match labels of shape ",
                                       labels.shape()));
  }
  Tensor hit =
      cast(equal(cast(classes, DType::kFloat64), cast(labels, DType::kFloat64)), DType::kFloat64);
  Tensor w = weights_for(weights, hit, name());
  state_[0] += total(mul(hit, w));
  state_[1] += total(w);
}

double Accuracy::result() const { return state_[1] == 0 ? 0.0 : state_[0] / state_[1]; }

void Precision::update_state(const Tensor& labels, const Tensor& predictions,
                             const Tensor& weights) {
  check_binary_inputs(name(), labels, predictions);
  auto [tp, fp, fn] =
      confusion(labels, predictions, weights_for(weights, labels, name()), threshold_);
  state_[0] += tp;
  state_[1] += fp;
}

double Precision::result() const {
  double d = state_[0] + state_[1];
  return d == 0 ? 0.0 : state_[0] / d;
}

void Recall::update_state(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  check_binary_inputs(name(), labels, predictions);
  auto [tp, fp, fn] =
      confusion(labels, predictions, weights_for(weights, labels, name()), threshold_);
  state_[0] += tp;
  state_[1] += fn;
}

double Recall::result() const {
  double d = state_[0] + state_[1];
  return d == 0 ? 0.0 : state_[0] / d;
}

Auc::Auc(std::string name, int num_thresholds, Curve curve)
    : Metric(std::move(name), static_cast<size_t>(4 * std::max(num_thresholds, 2))),
      num_thresholds_(num_thresholds),
      curve_(curve) {
  if (num_thresholds < 2) {
    throw InvalidArgumentError(str_cat("AUC: num_thresholds must be > 1, got ", num_thresholds));
  }
  // As tf.keras: just below 0, evenly inside, just above 1.
  constexpr double kEpsilon = 1e-7;
  thresholds_.resize(num_thresholds);
  thresholds_.front() = -kEpsilon;
  for (int i = 1; i < num_thresholds - 1; ++i) {
    thresholds_[i] = static_cast<double>(i) / (num_thresholds - 1);
  }
  thresholds_.back() = 1 + kEpsilon;
}

void Auc::update_state(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  check_binary_inputs(name(), labels, predictions);
  std::vector<double> y = labels.to_vector<double>();
  std::vector<double> p = predictions.to_vector<double>();
  std::vector<double> w = weights_for(weights, labels, name()).to_vector<double>();
  size_t t = thresholds_.size();
  // State layout: tp[t], fp[t], tn[t], fn[t]. An example is predicted positive at every
  // threshold strictly below its score.
  for (size_t i = 0; i < y.size(); ++i) {
    size_t above = static_cast<size_t>(
        std::lower_bound(thresholds_.begin(), thresholds_.end(), p[i]) - thresholds_.begin());
    bool positive = y[i] != 0;
    for (size_t k = 0; k < t; ++k) {
      bool predicted = k < above;
      size_t slot = positive ? (predicted ? 0 : 3) : (predicted ? 1 : 2);
      state_[slot * t + k] += w[i];
    }
  }
}

// The precision-recall curve as tf.keras sums it by default ("interpolation", Davis &
// Goadrich 2006): precision interpolated between thresholds as the true positives grow
// linearly with the predicted positives, not the trapezoid, which overstates it where
// precision jumps.
double Auc::pr_interpolated() const {
  size_t t = thresholds_.size();
  auto tp = [&](size_t k) { return state_[k]; };
  auto p = [&](size_t k) { return state_[k] + state_[t + k]; };
  auto fn = [&](size_t k) { return state_[3 * t + k]; };
  double area = 0;
  for (size_t k = 0; k + 1 < t; ++k) {
    double dtp = tp(k) - tp(k + 1), dp = std::max(p(k) - p(k + 1), 0.0);
    double slope = dp == 0 ? 0 : dtp / dp;
    double intercept = tp(k + 1) - slope * p(k + 1);
    double ratio = p(k) > 0 && p(k + 1) > 0 ? p(k) / p(k + 1) : 1;
    double positives = std::max(tp(k + 1) + fn(k + 1), 0.0);
    if (positives > 0) area += slope * (dtp + intercept * std::log(ratio)) / positives;
  }
  return area;
}

double Auc::result() const {
  if (curve_ == Curve::kPr) return pr_interpolated();
  size_t t = thresholds_.size();
  auto at = [&](size_t slot, size_t k) { return state_[slot * t + k]; };
  auto safe = [](double a, double b) { return b == 0 ? 0.0 : a / b; };
  double area = 0;
  for (size_t k = 0; k + 1 < t; ++k) {
    double tpr0 = safe(at(0, k), at(0, k) + at(3, k)),
           tpr1 = safe(at(0, k + 1), at(0, k + 1) + at(3, k + 1));
    double fpr0 = safe(at(1, k), at(1, k) + at(2, k)),
           fpr1 = safe(at(1, k + 1), at(1, k + 1) + at(2, k + 1));
    area += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
  }
  return area;
}

namespace metrics {
namespace {

template <typename M, typename... Args>
std::shared_ptr<Metric> update(const std::string& name, const Tensor& labels,
                               const Tensor& predictions, const Tensor& weights, Args... args) {
  auto metric = current_store().metric(scoped_name(name), [&]() -> std::shared_ptr<Metric> {
    return std::make_shared<M>(name, args...);
  });
  metric->update(labels, predictions, weights);
  return metric;
}

}  // namespace

std::shared_ptr<Metric> mean(const Tensor& values, const Tensor& weights, const std::string& name) {
  return update<Mean>(name, Tensor(), values, weights);
}
std::shared_ptr<Metric> accuracy(const Tensor& labels, const Tensor& predictions,
                                 const Tensor& weights, const std::string& name) {
  return update<Accuracy>(name, labels, predictions, weights);
}
std::shared_ptr<Metric> precision(const Tensor& labels, const Tensor& predictions,
                                  const Tensor& weights, const std::string& name) {
  return update<Precision>(name, labels, predictions, weights);
}
std::shared_ptr<Metric> recall(const Tensor& labels, const Tensor& predictions,
                               const Tensor& weights, const std::string& name) {
  return update<Recall>(name, labels, predictions, weights);
}
std::shared_ptr<Metric> auc(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
                            const std::string& name) {
  return update<Auc>(name, labels, predictions, weights);
}

}  // namespace metrics
}  // namespace cadre::nn
