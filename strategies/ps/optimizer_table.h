// The optimizers a ps task applies, one per configuration that pushes describe, with the
// step counter of each.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cadre/nn/optimizer.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

struct OptimizerState {
  std::string config;  // canonical, to tell a changed configuration
  std::shared_ptr<nn::Optimizer> optimizer;
  int64_t iterations = 0;
};

// Not thread-safe: the shard's mutex guards it.
class OptimizerTable {
 public:
  // The state of the optimizer `spec` describes, made when first seen. Workers describing
  // the same configuration (in any order of its numbers) share one.
  OptimizerState& find_or_make(const OptimizerSpec& spec);
  // The state of the optimizer named `name`, or null.
  OptimizerState* find(const std::string& name);
  const std::map<std::string, OptimizerState>& by_name() const { return by_name_; }

 private:
  std::map<std::string, OptimizerState> by_name_;
  std::map<std::string, std::string> names_;  // canonical config -> name
};

}  // namespace cadre::ps
