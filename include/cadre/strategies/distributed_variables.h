// The variables of a run under a strategy (Strategy::create_variables): one store per
// replica holding identical copies (mirrored), or one store that every replica shares
// (one device, central storage, and the local copies of parameter-server variables).
#pragma once

#include <memory>
#include <vector>

#include "cadre/nn/variable_store.h"

namespace cadre {

// Not thread-safe itself; the stores it holds are (nn::VariableStore).
class DistributedVariables {
 public:
  // `stores` is not empty: one store that every replica shares, or replica r's copies in
  // stores[r].
  explicit DistributedVariables(std::vector<std::unique_ptr<nn::VariableStore>> stores);
  virtual ~DistributedVariables() = default;

  // Replica r's view: its own copies, or the shared store.
  nn::VariableStore& store(int replica);
  // The logical variables, as checkpoints hold them (replica 0's copies).
  nn::VariableStore& primary() { return *stores_[0]; }
  // Whether each replica holds its own copy.
  bool mirrored() const { return stores_.size() > 1; }

 private:
  std::vector<std::unique_ptr<nn::VariableStore>> stores_;
};

}  // namespace cadre
