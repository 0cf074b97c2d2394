// What an evaluation returns: metric name -> value, with "loss" (the mean of the batches'
// losses) and "global_step" (the checkpoint's). Reading a metric that is not there throws
// instead of reading 0, since a misspelt name or a chief that evaluated nothing (in a
// cluster the evaluator task evaluates) would otherwise pass for a result.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace cadre {

class EvalResult {
 public:
  using Map = std::map<std::string, double>;

  EvalResult() = default;
  EvalResult(std::initializer_list<Map::value_type> metrics) : metrics_(metrics) {}

  // The metric's value; NotFoundError naming the metrics present when it is absent.
  double at(const std::string& name) const;
  double operator[](const std::string& name) const { return at(name); }
  std::optional<double> get(const std::string& name) const;
  bool contains(const std::string& name) const { return metrics_.count(name) != 0; }
  size_t count(const std::string& name) const { return metrics_.count(name); }

  void set(const std::string& name, double value) { metrics_[name] = value; }

  bool empty() const { return metrics_.empty(); }
  size_t size() const { return metrics_.size(); }
  Map::const_iterator begin() const { return metrics_.begin(); }
  Map::const_iterator end() const { return metrics_.end(); }
  const Map& metrics() const { return metrics_; }

  friend bool operator==(const EvalResult&, const EvalResult&) = default;

 private:
  Map metrics_;
};

}  // namespace cadre
