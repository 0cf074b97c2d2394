// The ps tasks of a cluster as a training task reaches them: a client for each, the options
// of ParameterServerStrategy, and the traffic so far. ParameterServerStrategy's extended
// object owns one and shows it to the framework (StrategyExtended::parameter_servers).
#pragma once

#include <memory>
#include <vector>

#include "cadre/strategies/cluster_spec.h"
#include "cadre/strategies/parameter_server_options.h"
#include "cadre/strategies/parameter_server_strategy.h"
#include "strategies/ps/input_report.h"
#include "strategies/ps/work_unit.h"

namespace cadre::ps {

class PsClient;

// Thread-safe.
class ParameterServers {
 public:
  // A client for each ps task of `cluster`, in index order (none on an evaluator, which
  // evaluates on its local devices); nothing is sent yet.
  ParameterServers(const ClusterConfig& cluster, const ParameterServerOptions& options);
  ~ParameterServers();

  const ParameterServerOptions& options() const { return options_; }
  const std::vector<std::unique_ptr<PsClient>>& clients() const { return clients_; }
  // Returns once every ps task answers; DeadlineExceededError naming the first that did not
  // within options().connect_timeout_seconds.
  void wait_until_ready() const;
  ParameterServerTraffic traffic() const;
  // The coordinator's unit this worker's pushes count toward (coordinator mode); empty
  // otherwise.
  WorkUnitSlot& work_unit() const { return work_unit_; }
  // This worker's input position on its way to ps 0 (input_report.h).
  InputReport& input_report() const { return input_report_; }

 private:
  ParameterServerOptions options_;
  mutable WorkUnitSlot work_unit_;
  mutable InputReport input_report_;
  std::vector<std::unique_ptr<PsClient>> clients_;
};

}  // namespace cadre::ps
